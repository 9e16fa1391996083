#include "kernel_harness.h"

#include <cctype>

#include <cstring>
#include <mutex>
#include <numeric>
#include <random>
#include <set>

#include "base/float16.h"
#include "base/sha256.h"
#include "base/small_types.h"
#include "ops/op_registry.h"
#include "reference/reference.h"

namespace strider::kernel_test {
namespace {

constexpr uint8_t kPoison = 0xA5;

void set_element(Tensor& t, int64_t i, double v) {
  switch (t.dtype()) {
    case DType::kF32: t.data<float>()[i] = float(v); break;
    case DType::kF16: t.data<uint16_t>()[i] = f16::from_float(float(v)).bits; break;
    case DType::kBF16: t.data<uint16_t>()[i] = bf16::from_float(float(v)).bits; break;
    case DType::kF64: t.data<double>()[i] = v; break;
    case DType::kI64: t.data<int64_t>()[i] = int64_t(v); break;
    case DType::kI32: t.data<int32_t>()[i] = int32_t(v); break;
    case DType::kI8: t.data<int8_t>()[i] = int8_t(v); break;
    case DType::kU8: t.data<uint8_t>()[i] = uint8_t(v); break;
    case DType::kBool: t.data<uint8_t>()[i] = v != 0 ? 1 : 0; break;
    case DType::kI16: t.data<int16_t>()[i] = int16_t(v); break;
    case DType::kU16: t.data<uint16_t>()[i] = uint16_t(v); break;
    case DType::kU32: t.data<uint32_t>()[i] = uint32_t(v); break;
    case DType::kU64: t.data<uint64_t>()[i] = uint64_t(v); break;
    default:  // the float8 / float4 / 4- and 2-bit types, one byte an element (base/small_types.h)
      if (!is_small_type(t.dtype())) ADD_FAILURE() << "the kernel harness has no test values for " << dtype_name(t.dtype());
      else t.data<uint8_t>()[i] = small_type_from_double(v, t.dtype());
      break;
  }
}

// Calls fn(element offset) for every element of a view, row-major.
template <typename Fn>
void for_each_offset(const TensorView& v, Fn fn) {
  std::vector<int64_t> index(v.sizes.size(), 0);
  for (int64_t i = 0; i < v.num_elements(); ++i) {
    int64_t offset = 0;
    for (size_t d = 0; d < index.size(); ++d) offset += index[d] * v.strides[d];
    fn(offset);
    for (size_t d = index.size(); d-- > 0;) {
      if (++index[d] < v.sizes[d]) break;
      index[d] = 0;
    }
  }
}

std::vector<double> doubles(const Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.num_elements(); ++i) v.push_back(t.element_as_double(i));
  return v;
}

int outermost_nontrivial(const Shape& sizes) {
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] > 1) return int(d);
  return -1;
}

}  // namespace

std::string layout_name(ViewLayout layout) {
  switch (layout) {
    case ViewLayout::kDense: return "dense";
    case ViewLayout::kChannelsLast: return "channels-last padded";
    case ViewLayout::kReversed: return "reversed";
    case ViewLayout::kChannelSlice: return "channel slice";
    case ViewLayout::kAlignedSlice: return "aligned channel slice";
    case ViewLayout::kBroadcast: return "broadcast";
    case ViewLayout::kNchwSlice: return "nchw channel slice";
    case ViewLayout::kPackedChannelsLast: return "packed channels-last";
  }
  return "?";
}

Placement place(const Shape& sizes, ViewLayout layout, bool is_output) {
  const size_t rank = sizes.size();
  Placement p;
  if (layout == ViewLayout::kBroadcast) {
    p.broadcast_dim = is_output ? -1 : outermost_nontrivial(sizes);
    Shape stored = sizes;
    if (p.broadcast_dim >= 0) stored[size_t(p.broadcast_dim)] = 1;
    p.strides = contiguous_strides(stored);
    if (p.broadcast_dim >= 0) p.strides[size_t(p.broadcast_dim)] = 0;
    p.elements = std::max<int64_t>(num_elements(stored), 1) + 8;
    return p;
  }
  std::vector<size_t> order(rank);  // storage order, outermost first
  std::iota(order.begin(), order.end(), 0);
  Shape extent = sizes;
  int slice_dim = -1;
  const bool slice = layout == ViewLayout::kChannelSlice || layout == ViewLayout::kAlignedSlice;
  const int64_t slice_start = layout == ViewLayout::kAlignedSlice ? 8 : 2;
  if (layout == ViewLayout::kNchwSlice && rank >= 2) {
    slice_dim = 1;
    extent[1] += 5;
  }
  if (layout == ViewLayout::kChannelsLast || layout == ViewLayout::kPackedChannelsLast || slice) {
    if (rank >= 3) {
      order = {0};
      for (size_t d = 2; d < rank; ++d) order.push_back(d);
      order.push_back(1);
    }
    if (layout == ViewLayout::kChannelsLast) {
      for (int64_t& e : extent) e += 1;
      p.offset = 3;
    } else if (slice && rank > 0) {  // kPackedChannelsLast: no gaps
      slice_dim = rank >= 2 ? 1 : 0;
      extent[size_t(slice_dim)] += layout == ViewLayout::kAlignedSlice ? 16 : 5;
    }
  }
  p.strides.assign(rank, 0);
  int64_t span = 1;
  for (size_t k = rank; k-- > 0;) {
    p.strides[order[k]] = span;
    span *= std::max<int64_t>(extent[order[k]], 1);
  }
  if (slice_dim >= 0) p.offset += (layout == ViewLayout::kNchwSlice ? 2 : slice_start) * p.strides[size_t(slice_dim)];
  if (layout == ViewLayout::kReversed) {
    std::set<size_t> reversed;
    for (size_t d = 0; d < rank; ++d)
      if (sizes[d] > 1) reversed.insert(d);
    if (reversed.size() > 2) reversed = {*reversed.begin(), *reversed.rbegin()};
    for (size_t d : reversed) {
      p.offset += (sizes[d] - 1) * p.strides[d];
      p.strides[d] = -p.strides[d];
    }
  }
  p.elements = p.offset + span + 8;
  return p;
}

std::string param_name(std::string_view device, ViewLayout layout) {
  std::string name = std::string(device) + "_" + layout_name(layout);
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

Result<std::unique_ptr<Device>> open_device(std::string_view name) {
  DeviceOptions options;
  options.queues = name == "sim" ? 2 : 1;
  if (name == "cpu-split") {  // three threads, every kernel of ours split over them
    options.threads = 3;
    options.min_parallel_work = 1;
    return create_device("cpu", options);
  }
  return create_device(name, options);
}

Tolerance tolerance_for(DType dtype) {
  if (dtype == DType::kBF16 || dtype == DType::kF16) return {2e-2, 1e-3, 0.999};
  return {1e-5, 1e-6, 0.99999};
}

Tensor random_tensor(DType dtype, const Shape& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal;
  Tensor t(dtype, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    double v = 0;
    switch (dtype) {
      case DType::kU8:
      case DType::kU16:
      case DType::kU32:
      case DType::kU64: v = double(rng() % 11); break;
      case DType::kI16:
      case DType::kBool: v = double(rng() & 1); break;
      case DType::kI64:
      case DType::kI32:
      case DType::kI8: v = double(int(rng() % 11) - 5); break;
      default: v = normal(rng);
    }
    set_element(t, i, v);
  }
  return t;
}

Tensor converted(const Tensor& values, DType dtype) {
  Tensor t(dtype, values.shape());
  for (int64_t i = 0; i < t.num_elements(); ++i) set_element(t, i, values.element_as_double(i));
  return t;
}

Tensor scalar_of(DType dtype, float value) {
  return converted(Tensor::from_values<float>(DType::kF32, {}, std::vector<float>{value}), dtype);
}

Tensor constant_along(const Tensor& values, int dim) {
  if (dim < 0) return values;
  const Shape& shape = values.shape();
  int64_t inner = 1;
  for (size_t d = size_t(dim) + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t slab = inner * shape[size_t(dim)], esize = dtype_size(values.dtype());
  Tensor out = values;
  for (int64_t i = 0; i < out.num_elements(); ++i) {
    int64_t source = (i / slab) * slab + i % inner;  // the same position in slice 0
    std::memcpy(out.bytes() + i * esize, values.bytes() + source * esize, size_t(esize));
  }
  return out;
}

Result<std::unique_ptr<DeviceBuffer>> DeviceBuffer::create(Device& device, DType dtype, const Shape& sizes,
                                                           ViewLayout layout, bool is_output) {
  Placement p = place(sizes, layout, is_output);
  const int64_t esize = dtype_size(dtype);
  STRIDER_ASSIGN_OR_RETURN(Allocation * allocation, device.allocate(p.elements * esize, 256, "kernel test view"));
  std::unique_ptr<DeviceBuffer> buffer(new DeviceBuffer(device, allocation));
  buffer->placement_ = p;
  Tensor poison(DType::kU8, {allocation->size()});
  std::memset(poison.bytes(), kPoison, size_t(allocation->size()));
  STRIDER_ASSIGN_OR_RETURN(TensorView whole, make_view(*allocation, 0, DType::kU8, {allocation->size()}, {1}, "whole"));
  STRIDER_RETURN_IF_ERROR(device.upload(poison, whole));
  STRIDER_ASSIGN_OR_RETURN(buffer->view_, make_view(*allocation, p.offset * esize, dtype, sizes, p.strides, "test view"));
  return buffer;
}

DeviceBuffer::~DeviceBuffer() { device_.release(allocation_); }

Status DeviceBuffer::write(const Tensor& values) {
  if (placement_.broadcast_dim < 0) return device_.upload(values, view_);
  // Stride 0 along the broadcast dim: write slice 0 (the values' leading elements, since
  // every dim before it has size 1) into the view with that dim of size 1.
  Shape compact_sizes = view_.sizes;
  compact_sizes[size_t(placement_.broadcast_dim)] = 1;
  Strides compact_strides = contiguous_strides(compact_sizes);
  STRIDER_ASSIGN_OR_RETURN(TensorView compact, make_view(*allocation_, view_.byte_offset, view_.dtype, compact_sizes,
                                                         compact_strides, "broadcast source"));
  Tensor first(values.dtype(), compact_sizes);
  std::memcpy(first.bytes(), values.bytes(), first.byte_size());
  return device_.upload(first, compact);
}

Result<Tensor> DeviceBuffer::read() const {
  Tensor t;
  STRIDER_RETURN_IF_ERROR(device_.download(view_, &t));
  return t;
}

Result<std::vector<int64_t>> DeviceBuffer::clobbered() const {
  STRIDER_ASSIGN_OR_RETURN(TensorView whole, make_view(*allocation_, 0, DType::kU8, {allocation_->size()}, {1}, "whole"));
  Tensor bytes;
  STRIDER_RETURN_IF_ERROR(device_.download(whole, &bytes));
  const int64_t esize = dtype_size(view_.dtype);
  std::vector<bool> mine(size_t(allocation_->size()), false);
  for_each_offset(view_, [&](int64_t offset) {
    for (int64_t b = 0; b < esize; ++b) mine[size_t(view_.byte_offset + offset * esize + b)] = true;
  });
  std::vector<int64_t> bad;
  for (size_t b = 0; b < mine.size(); ++b)
    if (!mine[b] && bytes.data<uint8_t>()[b] != kPoison) bad.push_back(int64_t(b));
  return bad;
}

namespace {

struct PreparedNode {
  std::vector<std::unique_ptr<DeviceBuffer>> buffers;
  std::vector<DeviceBuffer*> outputs;  // null where the output is omitted
  std::unique_ptr<Kernel> kernel;
};

// Uploads the inputs (constants dense, the rest in `layout`), poisons the outputs, and has
// the device make the kernel; `inputs` are the values as the views hold them.
Result<PreparedNode> prepare(Device& device, const Graph& graph, std::map<std::string, Tensor>& inputs, ViewLayout layout) {
  const Node& node = graph.node(0);
  PreparedNode prepared;
  KernelRequest request{graph, node, {}, {}};
  for (ValueId id : node.inputs) {
    if (id == kNoValue) {
      request.inputs.emplace_back();
      continue;
    }
    const Value& v = graph.value(id);
    const ViewLayout here = v.is_constant() ? ViewLayout::kDense : layout;
    STRIDER_ASSIGN_OR_RETURN(auto buffer, DeviceBuffer::create(device, v.dtype, v.shape, here, false));
    if (!v.is_constant()) {
      auto it = inputs.find(v.name);
      if (it == inputs.end()) return invalid_argument("no value for input " + v.name);
      it->second = constant_along(it->second, place(v.shape, here, false).broadcast_dim);
    }
    STRIDER_RETURN_IF_ERROR(buffer->write(v.is_constant() ? *v.constant : inputs.at(v.name)));
    request.inputs.push_back(buffer->view());
    prepared.buffers.push_back(std::move(buffer));
  }
  for (ValueId id : node.outputs) {
    if (id == kNoValue) {
      request.outputs.emplace_back();
      prepared.outputs.push_back(nullptr);
      continue;
    }
    const Value& v = graph.value(id);
    STRIDER_ASSIGN_OR_RETURN(auto buffer, DeviceBuffer::create(device, v.dtype, v.shape, layout, true));
    request.outputs.push_back(buffer->view());
    prepared.outputs.push_back(buffer.get());
    prepared.buffers.push_back(std::move(buffer));
  }
  STRIDER_ASSIGN_OR_RETURN(prepared.kernel, device.create_kernel(request));
  return prepared;
}

// ---- the reference, once per (graph, inputs) -------------------------------------------
// Every device x layout instance of a suite case (12 on the CPU build) asks the float64
// reference about the same graph and inputs. Under ASan and the fuzzer's coverage the
// reference was most of the suite's time (a Winograd case 4.4 s an instance, nearly all of
// it the reference's convolution), so each process computes it once per distinct pair.
// The key is the SHA-256 of everything the reference reads: every value's type, shape and
// constant bytes, every node's op, opset, wiring and attributes, the graph's inputs and
// outputs, and the given tensors. A graph with a subgraph attribute is not memoized.

class KeyWriter {
 public:
  void text(std::string_view s) {
    number(int64_t(s.size()));
    bytes_.append(s);
  }
  void number(int64_t v) { bytes_.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void numbers(const std::vector<int64_t>& v) {
    number(int64_t(v.size()));
    for (int64_t x : v) number(x);
  }
  void tensor(const Tensor& t) {
    number(int64_t(t.dtype()));
    numbers(t.shape());
    text(std::string_view(reinterpret_cast<const char*>(t.bytes()), t.byte_size()));
  }
  // False where the attribute cannot be written (a subgraph).
  bool attribute(const std::string& name, const Attribute& a) {
    text(name);
    number(int64_t(a.kind));
    number(a.i);
    bytes_.append(reinterpret_cast<const char*>(&a.f), sizeof a.f);
    text(a.s);
    numbers(a.ints);
    number(int64_t(a.floats.size()));
    bytes_.append(reinterpret_cast<const char*>(a.floats.data()), a.floats.size() * sizeof(float));
    number(int64_t(a.strings.size()));
    for (const std::string& x : a.strings) text(x);
    number(a.tensor != nullptr);
    if (a.tensor) tensor(*a.tensor);
    return a.graph == nullptr;
  }
  std::string digest() const { return sha256_hex(std::as_bytes(std::span(bytes_.data(), bytes_.size()))); }

 private:
  std::string bytes_;
};

std::optional<std::string> reference_key(const Graph& graph, const std::map<std::string, Tensor>& inputs) {
  KeyWriter w;
  for (ValueId id = 0; id < graph.num_values(); ++id) {
    const Value& v = graph.value(id);
    w.text(v.name);
    w.number(v.has_type);
    w.number(int64_t(v.dtype));
    w.number(v.has_shape);
    w.numbers(v.shape);
    w.number(v.is_constant());
    if (v.is_constant()) w.tensor(*v.constant);
  }
  for (NodeId id = 0; id < graph.num_nodes(); ++id) {
    const Node& n = graph.node(id);
    w.text(n.op_type);
    w.text(n.domain);
    w.number(n.opset);
    w.numbers(std::vector<int64_t>(n.inputs.begin(), n.inputs.end()));
    w.numbers(std::vector<int64_t>(n.outputs.begin(), n.outputs.end()));
    w.number(int64_t(n.attributes.all().size()));
    for (const auto& [name, a] : n.attributes.all())
      if (!w.attribute(name, a)) return std::nullopt;
  }
  w.numbers(std::vector<int64_t>(graph.inputs().begin(), graph.inputs().end()));
  w.numbers(std::vector<int64_t>(graph.outputs().begin(), graph.outputs().end()));
  for (const auto& [name, t] : inputs) {
    w.text(name);
    w.tensor(t);
  }
  return w.digest();
}

Result<std::shared_ptr<const ReferenceResult>> memoized_reference(const Graph& graph,
                                                                  const std::map<std::string, Tensor>& inputs) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const ReferenceResult>> memo;
  const std::optional<std::string> key = reference_key(graph, inputs);
  if (key) {
    std::lock_guard lock(mutex);
    if (auto found = memo.find(*key); found != memo.end()) return found->second;
  }
  STRIDER_ASSIGN_OR_RETURN(ReferenceResult result, evaluate_reference(graph, inputs));
  auto shared = std::make_shared<const ReferenceResult>(std::move(result));
  if (key) {
    std::lock_guard lock(mutex);
    memo.emplace(*key, shared);
  }
  return shared;
}

Status run_on_device_queue(Device& device, Kernel& kernel) {
  Queue& queue = device.queue(device.num_queues() - 1);
  Timepoint done = queue.submit(Command{"kernel under test", [&](const QueueContext& c) { return kernel.run(c); }, {}});
  STRIDER_RETURN_IF_ERROR(queue.wait(done.value));
  STRIDER_RETURN_IF_ERROR(device.synchronize());
  return kernel.check_completed();
}

thread_local std::string last_implementation_run;

}  // namespace

const std::string& last_implementation() { return last_implementation_run; }

void check_node(Device& device, Graph graph, const std::map<std::string, Tensor>& given, ViewLayout layout,
                const Graph* reference) {
  last_implementation_run.clear();
  ASSERT_EQ(graph.num_nodes(), 1);
  InferContext context(graph, 0);
  const Node& node = graph.node(0);
  const OpSchema* schema = find_op_schema(node.domain, node.op_type);
  ASSERT_NE(schema, nullptr) << node.op_type;
  Status inferred = schema->infer(context);
  ASSERT_TRUE(inferred.is_ok()) << inferred.to_string();
  const std::string what = node.op_type + " on " + std::string(device.name()) + " (" + layout_name(layout) + ")";
  std::map<std::string, Tensor> inputs = given;
  Result<PreparedNode> prepared = prepare(device, graph, inputs, layout);
  if (!prepared.is_ok() && prepared.status().code() == StatusCode::kUnsupported) {
    // Only views that are not packed may be refused (every layout but dense has some); the
    // planner packs them then. cpu and sim have a kernel for every op and dtype; cuda lacks
    // some (f64 matmuls, asymmetric convolution padding), which the test reports as skipped.
    if (layout == ViewLayout::kDense && device.name() == "cuda")
      GTEST_SKIP() << what << ": the device has no kernel for this: " << prepared.status().message();
    ASSERT_NE(layout, ViewLayout::kDense) << what << ": " << prepared.status().to_string();
    std::cout << "  [note] " << what << " refused these views: " << prepared.status().message() << "\n";
    return;
  }
  ASSERT_TRUE(prepared.is_ok()) << what << ": " << prepared.status().to_string();
  auto expected = memoized_reference(reference ? *reference : graph, inputs);
  ASSERT_TRUE(expected.is_ok()) << expected.status().to_string();
  Status ran = run_on_device_queue(device, *prepared->kernel);
  ASSERT_TRUE(ran.is_ok()) << what << ": " << ran.to_string();
  last_implementation_run = prepared->kernel->implementation();
  ASSERT_EQ(graph.outputs().size(), (*expected)->outputs.size());
  for (size_t i = 0, k = 0; i < prepared->outputs.size(); ++i) {
    if (!prepared->outputs[i]) continue;
    const DeviceBuffer& out = *prepared->outputs[i];
    const RefTensor& ref = (*expected)->outputs[k++];
    std::vector<double> wanted;
    for (int64_t e = 0; e < ref.num_elements(); ++e) wanted.push_back(ref.element_as_double(e));
    Result<Tensor> got = out.read();
    ASSERT_TRUE(got.is_ok()) << got.status().to_string();
    const DType dtype = out.view().dtype;
    Comparison c = compare_values(doubles(*got), wanted, tolerance_for(dtype), !is_floating(dtype));
    EXPECT_TRUE(c.passed) << what << " output " << i << ": " << c.reason;
    Result<std::vector<int64_t>> bad = out.clobbered();
    ASSERT_TRUE(bad.is_ok()) << bad.status().to_string();
    EXPECT_TRUE(bad->empty()) << what << " output " << i << " wrote " << bad->size()
                              << " bytes outside its view, first " << (bad->empty() ? 0 : (*bad)[0]);
  }
}

}  // namespace strider::kernel_test
