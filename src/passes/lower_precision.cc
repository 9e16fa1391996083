#include "passes/lower_precision.h"

#include <fmt/format.h>

#include <cmath>

#include "base/float16.h"
#include "base/onnx_types.h"
#include "ops/op_registry.h"

namespace strider {
namespace {

void store_float(Tensor& t, int64_t i, double v) {
  switch (t.dtype()) {
    case DType::kF32: t.data<float>()[i] = float(v); break;
    case DType::kF64: t.data<double>()[i] = v; break;
    case DType::kBF16: t.data<bf16>()[i] = bf16::from_float(float(v)); break;
    case DType::kF16: t.data<f16>()[i] = f16::from_float(float(v)); break;
    default: break;
  }
}

// Values read as a float parameter by some node keep f32.
std::vector<bool> parameter_values(const Graph& graph) {
  std::vector<bool> parameter(size_t(graph.num_values()), false);
  for (NodeId id = 0; id < graph.num_nodes(); ++id) {
    const Node& node = graph.node(id);
    const OpSchema* schema = find_op_schema(node.domain, node.op_type);
    if (schema == nullptr) continue;
    for (int i : schema->float_parameter_inputs)
      if (ValueId in = node.input(size_t(i)); in != kNoValue) parameter[size_t(in)] = true;
  }
  return parameter;
}

// A weight or folded constant in bf16. Rounded to nearest even, except that a finite value
// beyond bf16's largest finite one becomes that one, not infinity: the model asked for a
// finite number, and lowering is strider's choice, not the model's. It matters: exporters
// write masks as `(1 - mask) * -FLT_MAX`, which would round to -inf and turn 0 * -inf into NaN.
Result<Tensor> lower_constant(const Tensor& constant) {
  STRIDER_ASSIGN_OR_RETURN(Tensor lowered, convert_float_tensor(constant, DType::kBF16));
  if (constant.dtype() != DType::kF32) return lowered;
  const bf16 largest = bf16::from_bits(0x7F7F), lowest = bf16::from_bits(0xFF7F);
  const float* from = constant.data<float>();
  bf16* into = lowered.data<bf16>();
  for (int64_t i = 0; i < constant.num_elements(); ++i)
    if (std::isfinite(from[i]) && std::isinf(into[i].to_float())) into[i] = from[i] > 0 ? largest : lowest;
  return lowered;
}

}  // namespace

Result<Tensor> convert_float_tensor(const Tensor& tensor, DType to) {
  if (tensor.dtype() == to) return tensor;
  if (!is_floating(tensor.dtype()) || !is_floating(to))
    return invalid_argument(fmt::format("cannot convert {} to {}", dtype_name(tensor.dtype()), dtype_name(to)));
  Tensor result(to, tensor.shape());
  const int64_t n = tensor.num_elements();
  // The pairs a bf16 session converts on every run (its f32 inputs and outputs): typed loops.
  if (tensor.dtype() == DType::kF32 && to == DType::kBF16) {
    const float* from = tensor.data<float>();
    bf16* into = result.data<bf16>();
    for (int64_t i = 0; i < n; ++i) into[i] = bf16::from_float(from[i]);
    return result;
  }
  if (tensor.dtype() == DType::kBF16 && to == DType::kF32) {
    const bf16* from = tensor.data<bf16>();
    float* into = result.data<float>();
    for (int64_t i = 0; i < n; ++i) into[i] = from[i].to_float();
    return result;
  }
  for (int64_t i = 0; i < n; ++i) store_float(result, i, tensor.element_as_double(i));
  return result;
}

Result<std::shared_ptr<const Tensor>> LoweredConstants::lowered(const std::shared_ptr<const Tensor>& source) {
  std::lock_guard lock(mutex_);
  Entry& entry = entries_[source.get()];
  if (entry.source.lock() == source)  // the same tensor, not a new one at a freed address
    if (std::shared_ptr<const Tensor> kept = entry.lowered.lock()) return kept;
  STRIDER_ASSIGN_OR_RETURN(Tensor converted, lower_constant(*source));
  auto made = std::make_shared<const Tensor>(std::move(converted));
  entry = Entry{source, made};
  ++conversions_;
  std::erase_if(entries_, [](const auto& e) { return e.second.source.expired(); });
  return made;
}

std::shared_ptr<const Tensor> LoweredConstants::source_of(const std::shared_ptr<const Tensor>& lowered) const {
  std::lock_guard lock(mutex_);
  for (const auto& [address, entry] : entries_)  // a few weights of a model are asked about, once per plan
    if (entry.lowered.lock() == lowered) return entry.source.lock();
  return nullptr;
}

int64_t LoweredConstants::conversions() const {
  std::lock_guard lock(mutex_);
  return conversions_;
}

namespace {

// A new value shaped as `like`, named after it (made unique), f32 until lowered.
Result<ValueId> add_twin(Graph& graph, ValueId like, std::string_view suffix) {
  std::string name = graph.value(like).name + std::string(suffix);
  for (int n = 2; graph.find_value(name); ++n) name = graph.value(like).name + std::string(suffix) + std::to_string(n);
  STRIDER_ASSIGN_OR_RETURN(ValueId twin, graph.add_value(name));
  const Value& source = graph.value(like);
  Value& v = graph.value(twin);
  v.has_type = true;
  v.dtype = DType::kF32;
  v.has_shape = source.has_shape;
  v.shape = source.shape;
  return twin;
}

Node cast_node(const Graph& graph, std::string name, ValueId from, ValueId to, DType dtype) {
  Node node;
  node.name = std::move(name);
  node.op_type = "Cast";
  node.opset = graph.opsets().count("") ? graph.opsets().at("") : 13;
  node.inputs = {from};
  node.outputs = {to};
  node.attributes.set_int("to", onnx_type_code(dtype));
  return node;
}

void replace_reads(Graph& graph, ValueId from, ValueId to) {
  for (NodeId n = 0; n < graph.num_nodes(); ++n)
    for (ValueId& in : graph.node(n).inputs)
      if (in == from) in = to;
}

// The graph's f32 inputs and outputs stay f32 and the conversions to and from bf16 become
// Cast nodes, so they run on the device: converted on the host, a bf16 run's inputs took
// longer than the run (MobileNetV2 at batch 32 on an H200: run() 12.2 ms against 1.3 ms of
// device time, 5.2 ms in f32). Returns the values that keep f32.
Result<std::vector<bool>> cast_at_boundaries(Graph& graph, const std::vector<bool>& parameter) {
  std::vector<bool> keep(size_t(graph.num_values()), false);
  const auto lowered = [&](ValueId id) {
    const Value& v = graph.value(id);
    return v.has_type && v.dtype == DType::kF32 && !parameter[size_t(id)] && !v.is_constant();
  };
  const std::vector<ValueId> inputs = graph.inputs(), outputs = graph.outputs();
  for (ValueId in : inputs) {
    if (!lowered(in) || keep[size_t(in)]) continue;
    keep[size_t(in)] = true;
    STRIDER_ASSIGN_OR_RETURN(ValueId lowered_in, add_twin(graph, in, "/bf16"));
    replace_reads(graph, in, lowered_in);
    STRIDER_RETURN_IF_ERROR(
        graph.insert_node(0, cast_node(graph, "bf16_input_" + graph.value(in).name, in, lowered_in, DType::kBF16)).status());
  }
  for (ValueId out : outputs) {
    // An input handed straight back keeps f32 and no cast.
    if (!lowered(out) || keep[size_t(out)] || graph.value(out).producer == kNoNode) continue;
    keep[size_t(out)] = true;
    STRIDER_ASSIGN_OR_RETURN(ValueId computed, add_twin(graph, out, "/bf16"));
    replace_reads(graph, out, computed);
    Node& producer = graph.node(graph.value(out).producer);
    for (ValueId& o : producer.outputs)
      if (o == out) o = computed;
    graph.value(computed).producer = graph.value(out).producer;
    graph.value(out).producer = kNoNode;
    STRIDER_RETURN_IF_ERROR(
        graph.add_node(cast_node(graph, "bf16_output_" + graph.value(out).name, computed, out, DType::kF32)).status());
  }
  keep.resize(size_t(graph.num_values()), false);
  return keep;
}

}  // namespace

Status lower_to_bf16(Graph& graph, LoweredConstants* cache) {
  std::vector<bool> parameter = parameter_values(graph);
  STRIDER_ASSIGN_OR_RETURN(std::vector<bool> keep_f32, cast_at_boundaries(graph, parameter));
  parameter.resize(size_t(graph.num_values()), false);
  for (ValueId id = 0; id < graph.num_values(); ++id) {
    Value& v = graph.value(id);
    if (!v.has_type || v.dtype != DType::kF32 || parameter[size_t(id)] || keep_f32[size_t(id)]) continue;
    v.dtype = DType::kBF16;
    if (v.constant && cache) {
      STRIDER_ASSIGN_OR_RETURN(v.constant, cache->lowered(v.constant));
    } else if (v.constant) {
      STRIDER_ASSIGN_OR_RETURN(Tensor converted, lower_constant(*v.constant));
      v.constant = std::make_shared<const Tensor>(std::move(converted));
    }
  }
  for (NodeId id = 0; id < graph.num_nodes(); ++id) {
    Node& node = graph.node(id);
    if (node.op_type != "Cast" || node.outputs.empty()) continue;
    if (graph.value(node.outputs[0]).dtype != DType::kBF16) continue;
    STRIDER_ASSIGN_OR_RETURN(int64_t to, node.attributes.require_int("to"));
    if (to == onnx_type_code(DType::kF32)) node.attributes.set_int("to", onnx_type_code(DType::kBF16));
  }
  return Status::ok();
}

}  // namespace strider
