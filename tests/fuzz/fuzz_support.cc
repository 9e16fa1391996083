#include "fuzz_support.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "base/checked_math.h"
#include "exec/session_internal.h"
#include "onnx/importer.h"
#include "reference/reference.h"

namespace strider::fuzz {
namespace {

[[noreturn]] void fail(const char* why, const Status& status) {
  std::fprintf(stderr, "fuzz: %s: %s\n", why, status.to_string().c_str());
  std::abort();
}

// Small seeded values, for inputs that decide shapes as well as for data.
Tensor fill(DType dtype, const Shape& shape, std::mt19937& rng) {
  Tensor t(dtype, shape);
  std::uniform_int_distribution<int> small(-3, 8);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    int v = small(rng);
    switch (dtype) {
      case DType::kF32: t.data<float>()[i] = float(v) * 0.37f; break;
      case DType::kF64: t.data<double>()[i] = v * 0.37; break;
      case DType::kI64: t.data<int64_t>()[i] = v; break;
      case DType::kI32: t.data<int32_t>()[i] = v; break;
      case DType::kI8: t.data<int8_t>()[i] = int8_t(v); break;
      case DType::kU8: t.data<uint8_t>()[i] = uint8_t(v & 7); break;
      case DType::kBool: t.data<uint8_t>()[i] = uint8_t(v & 1); break;
      case DType::kI16: t.data<int16_t>()[i] = int16_t(v); break;
      case DType::kU16: t.data<uint16_t>()[i] = uint16_t(v); break;
      case DType::kU32: t.data<uint32_t>()[i] = uint32_t(v); break;
      case DType::kU64: t.data<uint64_t>()[i] = uint64_t(v); break;
      default: break;  // f16/bf16 stay zero: enough to exercise their paths
    }
  }
  return t;
}

bool small_enough(const Shape& shape, DType dtype) {
  std::optional<int64_t> n = checked_element_count(shape, dtype_size(dtype));
  // Fuzzing is about logic, not bulk: inputs past 256 KiB are skipped (a 2.75M-element pool
  // takes seconds under ASan and would read as a hang).
  return n && *n * dtype_size(dtype) <= (int64_t(256) << 10);
}

// Elements of every value of the session's planned graph (its shapes are all known), a
// saturating sum: what a run and the reference touch, at least once each.
int64_t planned_elements(const Session& session) {
  const Graph& g = *inspect_session(session).graph;
  int64_t total = 0;
  for (ValueId id = 0; id < g.num_values(); ++id) {
    const Value& v = g.value(id);
    std::optional<int64_t> n = v.has_shape ? checked_element_count(v.shape, 1) : std::nullopt;
    constexpr int64_t kCap = int64_t(1) << 40;
    if (n && *n >= 0) total = *n >= kCap - total ? kCap : total + *n;
  }
  return total;
}

}  // namespace

void require_clean(const Status& status) {
  if (status.is_ok()) return;
  if (status.code() == StatusCode::kInternal) fail("an internal error reached from a file", status);
  if (status.code() == StatusCode::kHazard) fail("accesses no wait orders", status);
  const std::string& m = status.message();
  for (char c : m)
    if ((static_cast<unsigned char>(c) < 0x20 && !(c == '\n' && status.code() == StatusCode::kHazard)) || c == 0x7f)
      fail("a control byte in a message", status);
  if (m.size() > Status::kMaxMessageBytes + 64) fail("a message longer than the cap", status);
}

void exercise_model(std::span<const std::byte> bytes) {
  ImportOptions import_options;
  import_options.max_constant_bytes = kFuzzMemoryBytes;
  Result<Graph> graph = import_model_bytes(bytes, "", "fuzz", import_options);
  if (!graph.is_ok()) return require_clean(graph.status());
  // Options and inputs follow from the model's bytes, so every run of an input is the same.
  uint8_t knob = bytes.empty() ? 0 : uint8_t(bytes[bytes.size() / 2]);
  std::mt19937 rng(uint32_t(bytes.size()) * 2654435761u + knob);
  SessionOptions options;
  options.max_memory_bytes = kFuzzMemoryBytes;
  // One thread: libFuzzer's coverage counters are shared, and a kernel's team of two
  // incrementing them made a run nine times slower here (a 262k-element cubic Resize: 5 s
  // on one thread, 48 s on two, past the timeout). Splits over threads are tested by the
  // kernel suite's cpu-split device and under ThreadSanitizer.
  options.threads = 1;
  options.layout = knob & 1 ? Layout::kNhwc : Layout::kNchw;
  options.fusion = (knob & 2) == 0;
  options.dtype = knob & 4 ? DType::kBF16 : DType::kF32;
  if (knob & 8) {  // the sim device, two queues, the sanitizer: a hazard is a finding too
    options.device = "sim";
    options.queues = 2;
    options.sanitize = true;
    options.sim_seed = knob;
  }
  std::map<std::string, Tensor> all_inputs;
  std::vector<std::string> fixed = shape_determining_inputs(*graph);
  for (ValueId id : graph->inputs()) {
    const Value& v = graph->value(id);
    Shape shape = v.shape;
    for (int64_t& d : shape) d = d < 0 ? 2 : d;  // dynamic dims: 2
    if (!v.has_type || !small_enough(shape, v.dtype)) return;  // session creation would refuse it; fine
    all_inputs[v.name] = fill(v.dtype, shape, rng);
    if (std::find(fixed.begin(), fixed.end(), v.name) != fixed.end()) options.constant_inputs[v.name] = all_inputs[v.name];
    else options.input_shapes[v.name] = shape;
  }
  auto session = create_session(*graph, options);
  if (!session.is_ok()) return require_clean(session.status());
  // Fuzzing is about logic, not bulk, and a small input can still make a large run: a
  // Resize over four axes from a 16k-element input to 262k elements (cubic: 256 taps an
  // output) took 15 s here under ASan and the fuzzer's coverage, the run and the reference.
  // The planned values' elements bound both: the run only up to 1M in all (that Resize ran
  // 5 s on one thread; past 1M a run is tens of seconds of instrumented loops), the
  // reference only up to 64k.
  const int64_t planned = planned_elements(**session);
  if (planned > (int64_t(1) << 20)) return;
  std::vector<Tensor> inputs;
  for (const ValueInfo& info : (*session)->inputs()) inputs.push_back(all_inputs[info.name]);
  auto outputs = (*session)->run(inputs);
  require_clean(outputs.status());
  // The reference reports what it cannot evaluate as it likes; it must still never crash.
  if (planned <= (int64_t(1) << 16)) (void)evaluate_reference(*graph, all_inputs);
}

}  // namespace strider::fuzz
