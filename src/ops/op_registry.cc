#include "ops/op_registry.h"

#include "ops/data_dependent.h"

#include "ops/attention.h"
#include "ops/conv_chain.h"
#include "ops/gated_stack.h"
#include "ops/wavenet_layer.h"
#include "ops/function_ops.h"
#include "ops/quantize.h"
#include "ops/recurrent.h"
#include "ops/index_map.h"
#include "ops/normalization.h"
#include "ops/scatter.h"

#include <algorithm>
#include <mutex>

namespace strider {

Result<std::vector<int64_t>> NodeInputs::constant_ints(size_t i, std::string_view what) const {
  const Tensor* t = input_constant(i);
  if (t == nullptr)
    return unsupported(fmt::format(
        "input {} ('{}', the {}) must be known at session creation for static shapes, but it is "
        "computed at run time",
        i, has_input(i) ? input(i).name : "", what));
  if (is_floating(t->dtype()))
    return invalid_model(fmt::format("input {} ('{}', the {}) must be integers, got {}", i,
                                     input(i).name, what, dtype_name(t->dtype())));
  std::vector<int64_t> values(size_t(t->num_elements()));
  for (int64_t k = 0; k < t->num_elements(); ++k) values[size_t(k)] = t->element_as_int(k);
  return values;
}

Result<std::vector<double>> NodeInputs::constant_floats(size_t i, std::string_view what) const {
  const Tensor* t = input_constant(i);
  if (t == nullptr)
    return unsupported(fmt::format(
        "input {} ('{}', the {}) must be known at session creation for static shapes, but it is "
        "computed at run time",
        i, has_input(i) ? input(i).name : "", what));
  std::vector<double> values(size_t(t->num_elements()));
  for (int64_t k = 0; k < t->num_elements(); ++k) values[size_t(k)] = t->element_as_double(k);
  return values;
}

void InferContext::set_output(size_t i, DType dtype, Shape shape) {
  if (!has_output(i)) return;
  Value& v = mutable_graph_.value(node().outputs[i]);
  v.has_type = v.has_shape = true;
  v.dtype = dtype;
  v.shape = std::move(shape);
}

void InferContext::set_output_constant(size_t i, Tensor value) {
  if (!has_output(i)) return;
  set_output(i, value.dtype(), value.shape());
  mutable_graph_.value(node().outputs[i]).constant = std::make_shared<const Tensor>(std::move(value));
}

namespace {

const std::vector<OpSchema>& all_schemas() {
  static const std::vector<OpSchema> schemas = [] {
    std::vector<OpSchema> ops;
    register_elementwise_ops(ops);
    register_tensor_ops(ops);
    register_nn_ops(ops);
    register_resize_ops(ops);
    register_grid_ops(ops);
    register_roi_align_ops(ops);
    register_normalization_ops(ops);
    register_index_map_ops(ops);
    register_scatter_ops(ops);
    register_attention_ops(ops);
    register_function_ops(ops);
    register_quantize_ops(ops);
    register_recurrent_ops(ops);
    register_data_dependent_ops(ops);
    std::sort(ops.begin(), ops.end(),
              [](const OpSchema& a, const OpSchema& b) { return a.op_type < b.op_type; });
    return ops;
  }();
  return schemas;
}

}  // namespace

namespace {

Status infer_materialize(InferContext& ctx) {
  ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(0));
  return Status::ok();
}

}  // namespace

const OpSchema* find_op_schema(std::string_view domain, std::string_view op_type) {
  // strider's own ops, which only strider inserts: Materialize (the planner) copies a view
  // into a packed value for a kernel that cannot read the view; FusedElementwise (the
  // fusion pass) runs a group of elementwise ops as one; FusedAttention (passes/fuse_attention.h)
  // an attention's scores, softmax and weighted sum.
  static const OpSchema kMaterialize{"Materialize", infer_materialize};
  static const OpSchema kFused = fused_elementwise_schema();
  static const OpSchema kFusedConv = fused_conv_schema();
  static const OpSchema kFusedGatedConv = fused_gated_conv_schema();
  static const OpSchema kFusedMatMul = fused_matmul_schema();
  static const OpSchema kFusedAttention = fused_attention_schema();
  static const OpSchema kConvChain = conv_chain_schema();
  static const OpSchema kGatedStack = gated_stack_schema();
  static const OpSchema kWaveNetLayer = wavenet_layer_schema();
  static const OpSchema kMapGroup = fused_map_group_schema();
  if (domain == kStriderDomain) {
    if (op_type == kConvChain.op_type) return &kConvChain;
    if (op_type == kGatedStack.op_type) return &kGatedStack;
    if (op_type == kWaveNetLayer.op_type) return &kWaveNetLayer;
    if (op_type == "Materialize") return &kMaterialize;
    if (op_type == kFusedConv.op_type) return &kFusedConv;
    if (op_type == kFusedGatedConv.op_type) return &kFusedGatedConv;
    if (op_type == kFusedMatMul.op_type) return &kFusedMatMul;
    if (op_type == kFusedAttention.op_type) return &kFusedAttention;
    if (op_type == kMapGroup.op_type) return &kMapGroup;
    return op_type == kFused.op_type ? &kFused : nullptr;
  }
  if (!domain.empty() && domain != "ai.onnx") return nullptr;
  const auto& ops = all_schemas();
  auto it = std::lower_bound(ops.begin(), ops.end(), op_type,
                             [](const OpSchema& s, std::string_view t) { return s.op_type < t; });
  return it != ops.end() && it->op_type == op_type ? &*it : nullptr;
}

std::vector<std::string_view> registered_op_types() {
  std::vector<std::string_view> names;
  for (const OpSchema& s : all_schemas()) names.push_back(s.op_type);
  return names;
}

}  // namespace strider
