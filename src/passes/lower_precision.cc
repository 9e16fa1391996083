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

int64_t LoweredConstants::conversions() const {
  std::lock_guard lock(mutex_);
  return conversions_;
}

Status lower_to_bf16(Graph& graph, LoweredConstants* cache) {
  std::vector<bool> parameter = parameter_values(graph);
  for (ValueId id = 0; id < graph.num_values(); ++id) {
    Value& v = graph.value(id);
    if (!v.has_type || v.dtype != DType::kF32 || parameter[size_t(id)]) continue;
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
