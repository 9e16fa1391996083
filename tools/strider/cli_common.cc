#include "cli_common.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "strider/options.h"
#include "strider/printable.h"
#include "strider/tensor_file.h"
#include "strider/tools.h"

namespace strider::cli {
namespace fs = std::filesystem;

int exit_code_for(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk: return kExitOk;
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound: return kExitUsage;
    case StatusCode::kInvalidModel:
    case StatusCode::kUnsupported: return kExitBadModel;
    case StatusCode::kHazard: return kExitCheckFailed;
    default: return kExitRuntime;  // device, I/O, resources, internal
  }
}

int report_error(const Status& status) {
  if (status.code() == StatusCode::kHazard) {
    std::string findings = status.message();
    for (size_t start = 0; start < findings.size();) {
      size_t end = findings.find('\n', start);
      if (end == std::string::npos) end = findings.size();
      std::fprintf(stderr, "strider: %s\n", findings.substr(start, end - start).c_str());
      start = end + 1;
    }
    return exit_code_for(status);
  }
  std::fprintf(stderr, "strider: error: %s\n", status.to_string().c_str());
  return exit_code_for(status);
}

void add_model_options(CLI::App& app, ModelOptions& o) {
  app.add_option("model", o.model, "the .onnx model (or a folder in the ONNX test layout)")->required();
  app.add_option("--input", o.input_files, "an input as NAME=FILE (.npy or TensorProto .pb); repeatable");
  app.add_option("--inputs-dir", o.inputs_dir, "a folder with input_<i>.pb or input_<i>.npy, by position");
  app.add_flag("--random-inputs", o.random_inputs, "seeded random values for inputs not given");
  app.add_option("--seed", o.seed, "seed of the random inputs (default 0)")->check(CLI::NonNegativeNumber);
  app.add_option("--shape", o.shapes, "size of an input's dims as NAME:1x3x320x320; repeatable");
  app.add_option("--dtype", o.dtype, "compute dtype: f32 or bf16")->check(CLI::IsMember({"f32", "bf16"}));
  app.add_option("--device", o.device, "device to run on: cpu, cuda, cuda:N, or sim (CPU kernels in a seeded random order)");
  app.add_option("--queues", o.queues, "device queues for independent branches (default 1)");
  app.add_option("--threads", o.threads, "cpu: threads each kernel may use (default 0: every core)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--sanitize", o.sanitize, "check that every conflicting pair of accesses is ordered (exit 1 if not)");
  app.add_option("--sim-seed", o.sim_seed, "sim device: seed of the execution order (default 0)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-memory", o.max_memory,
                 "most memory the session may hold, e.g. 4GiB or 512MiB (default: 80% of physical memory; on a GPU "
                 "90% of its memory)");
  app.add_option("--storage-mode", o.storage_mode,
                 "cuda: device, unified or host memory (default: STRIDER_STORAGE_MODE, else device)");
  app.add_flag("--allow-tf32", o.allow_tf32, "cuda: let f32 matmuls and convolutions use TF32");
  app.add_option("--winograd", o.winograd,
                 "cpu: 3x3 convolutions of 32+ channels may run as Winograd F(4x4,3x3), rounding error about 5x the "
                 "direct sum's (default on)")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--cuda-graph", o.cuda_graph, "cuda: capture the plan once as a CUDA graph (with one queue)")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--fusion", o.fusion, "fold chains of elementwise ops, a conv with its activation, and attention (scores, softmax, weighted sum) into one kernel each (default on)")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_flag("--debug-drop-waits", o.debug_drop_waits,
               "testing aid: drop every cross-queue wait, to see the sim device and the sanitizer catch it");
  app.add_option("--layout", o.layout, "activation layout: nchw, nhwc or auto (nhwc for conv-heavy graphs)")
      ->check(CLI::IsMember({"nchw", "nhwc", "auto"}));
}

namespace {

Result<std::pair<std::string, Shape>> parse_shape(const std::string& text) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return invalid_argument(fmt::format("--shape '{}': expected NAME:AxBxC", text));
  Shape shape;
  std::string dims = text.substr(colon + 1);
  size_t start = 0;
  while (start <= dims.size()) {
    size_t end = dims.find('x', start);
    std::string part = dims.substr(start, end == std::string::npos ? std::string::npos : end - start);
    int64_t value = -1;
    auto [rest, ec] = std::from_chars(part.data(), part.data() + part.size(), value);
    if (part.empty() || ec != std::errc() || rest != part.data() + part.size() || value < 0)
      return invalid_argument(fmt::format("--shape '{}': '{}' is not a dimension size (0 to 2^63-1)", text, part));
    shape.push_back(value);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return std::make_pair(text.substr(0, colon), shape);
}

// Seeded random values for an input; the tensor must fit the memory budget (its f64
// staging too, for floats).
Result<Tensor> random_tensor(const std::string& name, DType dtype, const Shape& shape, std::mt19937_64& rng,
                             int64_t budget) {
  std::string what = fmt::format("random input '{}'", printable(name));
  Result<Tensor> made = Tensor::create(dtype, shape, budget);
  if (!made.is_ok()) return made.status().with_context(what);
  Tensor t = std::move(*made);
  Tensor f64;
  if (is_floating(dtype)) {
    Result<Tensor> staging = Tensor::create(DType::kF64, shape, budget - int64_t(t.byte_size()));
    if (!staging.is_ok()) return staging.status().with_context(what);
    f64 = std::move(*staging);
  }
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_int_distribution<int64_t> small(0, 7);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    switch (dtype) {
      case DType::kI64: t.data<int64_t>()[i] = small(rng); break;
      case DType::kI32: t.data<int32_t>()[i] = int32_t(small(rng)); break;
      case DType::kI8: t.data<int8_t>()[i] = int8_t(small(rng)); break;
      case DType::kU8: t.data<uint8_t>()[i] = uint8_t(small(rng)); break;
      case DType::kI16: t.data<int16_t>()[i] = int16_t(small(rng)); break;
      case DType::kU16: t.data<uint16_t>()[i] = uint16_t(small(rng)); break;
      case DType::kU32: t.data<uint32_t>()[i] = uint32_t(small(rng)); break;
      case DType::kU64: t.data<uint64_t>()[i] = uint64_t(small(rng)); break;
      case DType::kBool: t.data<uint8_t>()[i] = uint8_t(small(rng) & 1); break;
      // The 4- and 2-bit integers, one byte each in memory: 0..1 is in every one's range.
      case DType::kI4: case DType::kU4: case DType::kI2: case DType::kU2: t.data<uint8_t>()[i] = uint8_t(small(rng) & 1); break;
      default: f64.data<double>()[i] = normal(rng); break;
    }
  }
  return is_floating(dtype) ? convert_float_tensor(f64, dtype) : Result<Tensor>(std::move(t));
}

Result<Tensor> read_input_file(const std::string& spec, std::string* name) {
  auto eq = spec.find('=');
  if (eq == std::string::npos || eq == 0)
    return invalid_argument(fmt::format("--input '{}': expected NAME=FILE", spec));
  *name = spec.substr(0, eq);
  return read_tensor_file(spec.substr(eq + 1));
}

// Fills `inputs` (by model input position) from --input, --inputs-dir and random values.
Status load_inputs(const Model& model, const ModelOptions& o, const std::string& inputs_dir,
                   const std::map<std::string, Shape>& shapes, int64_t budget,
                   std::vector<std::optional<Tensor>>& inputs) {
  const std::vector<ValueInfo>& declared = model.inputs();
  const size_t count = declared.size();
  if (!inputs_dir.empty()) {
    STRIDER_ASSIGN_OR_RETURN(std::vector<Tensor> from_dir, read_numbered_tensors(inputs_dir, "input", count));
    for (size_t i = 0; i < count; ++i) inputs[i] = std::move(from_dir[i]);
  }
  for (const std::string& spec : o.input_files) {
    std::string name;
    STRIDER_ASSIGN_OR_RETURN(Tensor t, read_input_file(spec, &name));
    auto it = std::find_if(declared.begin(), declared.end(), [&](const ValueInfo& v) { return v.name == name; });
    if (it == declared.end()) return invalid_argument(fmt::format("--input names '{}', which is not a model input", name));
    inputs[size_t(it - declared.begin())] = std::move(t);
  }
  bool none_given = inputs_dir.empty() && o.input_files.empty();
  std::mt19937_64 rng(o.seed);
  for (size_t i = 0; i < count; ++i) {
    const ValueInfo& v = declared[i];
    if (inputs[i]) continue;
    if (!o.random_inputs && !none_given)
      return invalid_argument(fmt::format("missing input '{}'; give it with --input {}=FILE or use --random-inputs", v.name, v.name));
    Shape shape = shapes.count(v.name) ? shapes.at(v.name) : v.shape;
    for (size_t d = 0; d < shape.size(); ++d)
      if (shape[d] < 0)
        return invalid_argument(fmt::format("input '{}' dim {} is dynamic; give its size with --shape {}:{}", v.name, d,
                                            v.name, shape_to_dims(shape)));
    STRIDER_ASSIGN_OR_RETURN(inputs[i], random_tensor(v.name, v.dtype, shape, rng, budget));
  }
  return Status::ok();
}

}  // namespace

Result<std::vector<Tensor>> read_numbered_tensors(const std::string& dir, const std::string& prefix, size_t count) {
  std::vector<Tensor> tensors;
  for (size_t i = 0; i < count; ++i) {
    std::string base = fmt::format("{}/{}_{}", dir, prefix, i);
    std::error_code ec;
    std::string path = fs::exists(base + ".pb", ec) ? base + ".pb" : base + ".npy";
    if (!fs::exists(path, ec)) return not_found(fmt::format("{}: neither {}.pb nor {}.npy exists", dir, base, base));
    STRIDER_ASSIGN_OR_RETURN(Tensor t, read_tensor_file(path));
    tensors.push_back(std::move(t));
  }
  return tensors;
}

Result<PreparedRun> prepare_run(const ModelOptions& o, const std::string& model_file, const std::string& inputs_dir) {
  PreparedRun run;
  int64_t budget = default_host_memory_budget();
  if (!o.max_memory.empty()) {
    std::optional<int64_t> bytes = parse_byte_size(o.max_memory);
    if (!bytes || *bytes == 0)
      return invalid_argument(fmt::format("--max-memory '{}': expected a size such as 4GiB, 512MiB or 1000000",
                                          printable(o.max_memory)));
    budget = *bytes;
    run.session_options.max_memory_bytes = budget;
  }
  Model::Options model_options;
  model_options.max_constant_bytes = budget;
  // A folder in the ONNX test layout names its model.onnx (check walks its data sets itself).
  std::error_code ec;
  const std::string file = fs::is_directory(model_file, ec) ? (fs::path(model_file) / "model.onnx").string() : model_file;
  STRIDER_ASSIGN_OR_RETURN(run.model, Model::load(file, model_options));
  const std::vector<ValueInfo>& declared = run.model->inputs();
  std::map<std::string, Shape> shapes;
  for (const std::string& text : o.shapes) {
    STRIDER_ASSIGN_OR_RETURN(auto parsed, parse_shape(text));
    if (std::none_of(declared.begin(), declared.end(), [&](const ValueInfo& v) { return v.name == parsed.first; }))
      return invalid_argument(fmt::format("--shape names '{}', which is not a model input", printable(parsed.first)));
    shapes[parsed.first] = parsed.second;
  }
  std::vector<std::optional<Tensor>> inputs(declared.size());
  STRIDER_RETURN_IF_ERROR(load_inputs(*run.model, o, inputs_dir, shapes, budget, inputs));
  run.session_options.device = o.device;
  run.session_options.queues = o.queues;
  run.session_options.threads = o.threads;
  // The environment is the CLI's to read, not the library's.
  const char* sanitize_env = std::getenv("STRIDER_SANITIZE");
  run.session_options.sanitize = o.sanitize || (sanitize_env && std::string(sanitize_env) == "1");
  run.session_options.sim_seed = o.sim_seed;
  const char* mode_env = std::getenv("STRIDER_STORAGE_MODE");
  const std::string mode = !o.storage_mode.empty() ? o.storage_mode : mode_env ? mode_env : "device";
  std::optional<StorageMode> storage = parse_storage_mode(mode);
  if (!storage)
    return invalid_argument(fmt::format("storage mode '{}' (--storage-mode or STRIDER_STORAGE_MODE) is not one of "
                                        "device, unified, host", printable(mode)));
  run.session_options.storage_mode = *storage;
  run.session_options.allow_tf32 = o.allow_tf32;
  run.session_options.winograd = o.winograd == "on";
  run.session_options.cuda_graph = o.cuda_graph == "on";
  run.session_options.fusion = o.fusion == "on";
  std::optional<Layout> layout = parse_layout(o.layout);
  if (!layout) return invalid_argument(fmt::format("layout '{}' is not nchw, nhwc or auto", printable(o.layout)));
  run.session_options.layout = *layout;
  run.session_options.dtype = o.dtype == "bf16" ? DType::kBF16 : DType::kF32;
  run.session_options.input_shapes = shapes;
  const std::vector<std::string>& fixed = run.model->shape_inputs();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string& name = declared[i].name;
    run.all_inputs[name] = *inputs[i];
    if (std::find(fixed.begin(), fixed.end(), name) != fixed.end()) {
      // Static shapes: an input that decides a shape becomes a constant of the session.
      run.session_options.constant_inputs[name] = std::move(*inputs[i]);
      continue;
    }
    // A given tensor fixes the input's dims (dynamic ones included); --shape must agree.
    if (shapes.count(name) && shapes[name] != inputs[i]->shape())
      return invalid_argument(fmt::format("input '{}': --shape {} but the given tensor is {}", name,
                                          shape_to_dims(shapes[name]), shape_to_dims(inputs[i]->shape())));
    run.session_options.input_shapes[name] = inputs[i]->shape();
    run.inputs.push_back(std::move(*inputs[i]));
  }
  ToolSessionOptions tool_options;
  tool_options.drop_waits = o.debug_drop_waits;
  STRIDER_ASSIGN_OR_RETURN(run.session, create_tool_session(*run.model, run.session_options, tool_options));
  // Said once per command: a bf16 session on a CPU without bf16 instructions runs slower.
  if (o.device == "cpu" || o.device == "sim")
    if (std::string notice = cpu_dtype_notice(run.session_options.dtype); !notice.empty())
      fmt::print(stderr, "strider: note: {}\n", notice);
  return run;
}

Status write_text_file(const std::string& path, const std::string& text, const char* what) {
  std::ofstream out(path);
  out << text;
  if (!out) return io_error(fmt::format("cannot write {} file '{}'", what, path));
  return Status::ok();
}

std::string tensor_statistics(const Tensor& t) {
  int64_t n = t.num_elements();
  if (n == 0) return "empty";
  double low = INFINITY, high = -INFINITY, sum = 0, sum_sq = 0;
  int64_t nonfinite = 0;
  for (int64_t i = 0; i < n; ++i) {
    double v = t.element_as_double(i);
    if (!std::isfinite(v)) {
      ++nonfinite;
      continue;
    }
    low = std::min(low, v);
    high = std::max(high, v);
    sum += v;
    sum_sq += v * v;
  }
  int64_t finite = n - nonfinite;
  double mean = finite ? sum / double(finite) : 0;
  double std_dev = finite ? std::sqrt(std::max(0.0, sum_sq / double(finite) - mean * mean)) : 0;
  std::string text = fmt::format("min {:.6g} max {:.6g} mean {:.6g} std {:.6g}", low, high, mean, std_dev);
  if (nonfinite) text += fmt::format(" nonfinite {}", nonfinite);
  return text;
}

}  // namespace strider::cli
