#include "exec/step_cost.h"

#include <string_view>

#include "ops/conv_chain.h"
#include "ops/fused_attention.h"
#include "ops/fused_elementwise.h"
#include "ops/gated_stack.h"
#include "ops/wavenet_layer.h"

namespace strider {
namespace {

int64_t view_bytes(const TensorView& v) { return v.num_elements() * int64_t(dtype_size(v.dtype)); }

// Multiply-adds of a product whose output is `y` and whose reduced dim is `k`.
double product_flops(const TensorView& y, int64_t k) { return 2.0 * double(y.num_elements()) * double(k); }

double conv_flops(const Plan& plan, const Node& node) {
  const TensorView& w = plan.view(node.inputs[1]);  // [K, C / group, kernel...]
  int64_t per_output = 1;
  for (size_t d = 1; d < w.sizes.size(); ++d) per_output *= w.sizes[d];
  return product_flops(plan.view(node.outputs[0]), per_output);
}

double flops(const Plan& plan, const Node& node) {
  const std::string_view op = node.op_type;
  const bool ours = node.domain == "strider";
  if (ours && op == kFusedWaveNetLayerOp && node.inputs.size() > 1) {
    // Per time step: the gate's 2C rows of C K, then C rows of C (residual) and S of C (skip).
    const TensorView& x = plan.view(node.inputs[0]);
    const TensorView& wg = plan.view(node.inputs[1]);
    if (x.rank() != 3 || wg.rank() != 3) return 0;
    const double steps = double(x.sizes[0]) * double(x.sizes[2]), c = double(x.sizes[1]);
    double rows = 2 * c * double(wg.sizes[2]) * c;
    for (size_t w : {size_t(kWaveResW), size_t(kWaveSkipW)})
      if (node.input(w) != kNoValue) rows += double(plan.view(node.inputs[w]).sizes[0]) * c;
    return 2.0 * steps * rows;
  }
  if (node.outputs.empty() || node.outputs[0] == kNoValue) return 0;
  if ((op == "Conv" || (ours && op == kFusedConvOp)) && node.inputs.size() > 1) return conv_flops(plan, node);
  if (ours && op == kFusedGatedConvOp && node.inputs.size() > 1) return 2 * conv_flops(plan, node);  // 2K channels
  if (op == "MatMul" || (ours && op == kFusedMatMulOp)) {
    const TensorView& a = plan.view(node.inputs[0]);
    return a.rank() == 0 ? 0 : product_flops(plan.view(node.outputs[0]), a.sizes.back());
  }
  if (op == "Gemm") {
    const TensorView& a = plan.view(node.inputs[0]);
    auto trans_a = node.attributes.get_int("transA", 0);
    if (a.rank() != 2 || !trans_a.is_ok()) return 0;
    return product_flops(plan.view(node.outputs[0]), *trans_a ? a.sizes[0] : a.sizes[1]);
  }
  if (ours && op == kFusedPointwiseDepthwiseOp && node.inputs.size() == 5) {
    // The expansion over X's image (its output never stored), then the depthwise conv.
    const TensorView &x = plan.view(node.inputs[0]), &w1 = plan.view(node.inputs[1]), &w2 = plan.view(node.inputs[3]);
    const TensorView& y = plan.view(node.outputs[0]);
    if (x.rank() != 4 || w1.rank() != 4 || w2.rank() != 4) return 0;
    const double pixels = double(x.sizes[0]) * double(x.sizes[2]) * double(x.sizes[3]);
    return 2.0 * pixels * double(w1.sizes[0]) * double(w1.sizes[1]) +
           product_flops(y, w2.sizes[1] * w2.sizes[2] * w2.sizes[3]);
  }
  if (ours && op == kFusedGatedStackOp && node.inputs.size() > 1) {
    // Each unit: a product of 2C rows of C per pixel (the gates' few flops not counted).
    const TensorView& x = plan.view(node.inputs[0]);
    if (x.rank() < 2) return 0;
    return double(gated_stack_units(node)) * product_flops(x, 2 * x.sizes[1]);
  }
  if (ours && op == kFusedAttentionOp && node.inputs.size() > kAttnV) {
    const TensorView& q = plan.view(node.inputs[kAttnQ]);   // [.., Sq, D]
    const TensorView& kt = plan.view(node.inputs[kAttnKt]);  // [.., D, T]
    const TensorView& y = plan.view(node.outputs[0]);        // [.., Sq, Dv]
    if (q.rank() < 2 || kt.rank() < 2) return 0;
    const double rows = double(y.num_elements()) / double(y.sizes.back());  // batch x Sq
    return 2.0 * rows * double(kt.sizes.back()) * double(q.sizes.back() + y.sizes.back());
  }
  return 0;
}

}  // namespace

StepCost step_cost(const Plan& plan, const Node& node) {
  StepCost cost;
  for (ValueId v : node.inputs)
    if (v != kNoValue) cost.bytes += view_bytes(plan.view(v));
  for (ValueId v : node.outputs)
    if (v != kNoValue) cost.bytes += view_bytes(plan.view(v));
  cost.flops = flops(plan, node);
  return cost;
}

}  // namespace strider
