// The scalar math of FusedAttention (ops/fused_attention.h) that every device's kernel
// runs: what a step does to a score, and when a row's softmax is undefined. Header-only
// and free of the graph, so nvcc compiles it for the GPU too.
#pragma once

#include <cmath>
#include <cstdint>

#include "base/host_device.h"

namespace strider {

// What one step of the score program does to the score s of query i and key j:
enum class ScoreStepKind : uint8_t {
  kMul,        // s * value            (a scale, Mul by a scalar constant)
  kDiv,        // s / value            (Div by a scalar constant: torch's / sqrt(d))
  kAdd,        // s + operand[i, j]    (an additive mask or a position bias)
  kKeepWhere,  // operand[i, j] ? s : value   (Where(mask, s, fill))
  kFillWhere,  // operand[i, j] ? value : s   (Where(mask, fill, s), masked_fill)
};
inline constexpr int kScoreStepKinds = 5;
inline constexpr int kMaxScoreSteps = 4;

struct ScoreStep {
  ScoreStepKind kind = ScoreStepKind::kMul;
  float value = 0;
};

STRIDER_HOST_DEVICE bool step_reads_operand(ScoreStepKind kind) {
  return kind == ScoreStepKind::kAdd || kind == ScoreStepKind::kKeepWhere || kind == ScoreStepKind::kFillWhere;
}

// `operand` is the bias element (kAdd) or the condition as 0 / 1 (the Where steps).
STRIDER_HOST_DEVICE float apply_score_step(ScoreStepKind kind, float value, float s, float operand) {
  switch (kind) {
    case ScoreStepKind::kMul: return s * value;
    case ScoreStepKind::kDiv: return s / value;
    case ScoreStepKind::kAdd: return s + operand;
    case ScoreStepKind::kKeepWhere: return operand != 0.0f ? s : value;
    case ScoreStepKind::kFillWhere: return operand != 0.0f ? value : s;
  }
  return s;
}

// A Div step by a power of two as the Mul by its reciprocal, which is then exact: both
// round the same real number s / value, so every score (subnormal, infinite or NaN ones
// included) comes out the same, without a division per score (torch's / sqrt(d) for
// heads of 64, 256 or 16). Other steps are returned as they are.
inline ScoreStep division_as_product(ScoreStep step) {
  if (step.kind != ScoreStepKind::kDiv || !std::isnormal(step.value)) return step;
  int exponent = 0;
  const float mantissa = std::frexp(step.value, &exponent);
  const float reciprocal = 1.0f / step.value;
  if (std::fabs(mantissa) != 0.5f || !std::isnormal(reciprocal)) return step;
  return {ScoreStepKind::kMul, reciprocal};
}

// A softmax row is defined when its largest score is finite: a NaN or +inf score, or only
// -inf scores, make exp(s - max) NaN somewhere and so the whole row NaN (the sum is NaN).
// `any_nan` says whether a NaN was seen (a max that skips NaNs does not see it).
STRIDER_HOST_DEVICE bool softmax_row_defined(float max_score, bool any_nan) {
  return !any_nan && max_score > -INFINITY && max_score < INFINITY;
}

}  // namespace strider
