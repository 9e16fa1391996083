// The reference's NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss, in float64, written
// from the ONNX operator definitions (ops/function_ops.h states them), apart from the
// runtime's expansion into primitive ops so that each checks the other.
#include <cmath>
#include <limits>

#include "reference/op_support.h"

namespace strider::ref {
namespace {

// The loss of log-probabilities `x` [N, C, d..] against the node's target and weight inputs.
Result<RefTensor> nll(const OpContext& ctx, const RefTensor& x) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* target, ctx.input(1, "target"));
  STRIDER_RETURN_IF_ERROR(require_integer(*target, "input 1 (target)"));
  const RefTensor* weight = ctx.optional_input(2);
  STRIDER_ASSIGN_OR_RETURN(std::string reduction, ctx.attributes().get_string("reduction", "mean"));
  const bool has_ignore = ctx.attributes().has("ignore_index");
  STRIDER_ASSIGN_OR_RETURN(int64_t ignore_index, ctx.attributes().get_int("ignore_index", 0));
  if (x.rank() < 2) return invalid_model("input must be [N, C, d1, ...]");
  const int64_t n = x.shape[0], classes = x.shape[1], inner = product(x.shape, 2, x.shape.size());
  Shape per_element = x.shape;
  per_element.erase(per_element.begin() + 1);
  if (target->shape != per_element) return invalid_model(fmt::format("target {} does not match input {}", describe(*target), describe(x)));
  if (weight && weight->shape != Shape{classes}) return invalid_model(fmt::format("weight {} is not [{}]", describe(*weight), classes));
  RefTensor loss = RefTensor::zeros(x.dtype, per_element);
  double total = 0, weights = 0;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t e = b * inner + i, c = target->element_as_int(e);
      if (has_ignore && c == ignore_index) continue;  // loss 0, weight 0
      if (c < 0 || c >= classes) return invalid_argument(fmt::format("target {} is outside [0, {})", c, classes));
      const double w = weight ? weight->floats[size_t(c)] : 1.0;
      loss.floats[size_t(e)] = -x.floats[size_t((b * classes + c) * inner + i)] * w;
      total += loss.floats[size_t(e)];
      weights += w;
    }
  if (reduction == "none") return loss;
  RefTensor scalar = RefTensor::zeros(x.dtype, {});
  if (reduction == "sum") scalar.floats[0] = total;
  else if (reduction == "mean") scalar.floats[0] = total / weights;
  else return invalid_model(fmt::format("reduction '{}' is not none, sum or mean", reduction));
  return scalar;
}

Result<OpOutputs> nll_loss_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "input"));
  STRIDER_RETURN_IF_ERROR(require_floating(*x, "input 0 (input)"));
  STRIDER_ASSIGN_OR_RETURN(RefTensor loss, nll(ctx, *x));
  return OpOutputs{std::move(loss)};
}

Result<OpOutputs> softmax_cross_entropy_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "scores"));
  STRIDER_RETURN_IF_ERROR(require_floating(*x, "input 0 (scores)"));
  if (x->rank() < 2) return invalid_model("scores must be [N, C, d1, ...]");
  RefTensor log_prob = *x;
  const int64_t n = x->shape[0], classes = x->shape[1], inner = product(x->shape, 2, x->shape.size());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t c) -> double& { return log_prob.floats[size_t((b * classes + c) * inner + i)]; };
      double max = -std::numeric_limits<double>::infinity(), sum = 0;
      for (int64_t c = 0; c < classes; ++c) max = std::max(max, at(c));
      for (int64_t c = 0; c < classes; ++c) sum += std::exp(at(c) - max);
      for (int64_t c = 0; c < classes; ++c) at(c) = at(c) - max - std::log(sum);
    }
  STRIDER_ASSIGN_OR_RETURN(RefTensor loss, nll(ctx, log_prob));
  return OpOutputs{std::move(loss), std::move(log_prob)};
}

constexpr OpDefinition kLossOps[] = {
    {"NegativeLogLikelihoodLoss", 12, 27, nll_loss_op},
    {"SoftmaxCrossEntropyLoss", 12, 27, softmax_cross_entropy_op},
};

}  // namespace

std::span<const OpDefinition> loss_op_definitions() { return kLossOps; }

}  // namespace strider::ref
