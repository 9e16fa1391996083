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

// A softmax row is defined when its largest score is finite: a NaN or +inf score, or only
// -inf scores, make exp(s - max) NaN somewhere and so the whole row NaN (the sum is NaN).
// `any_nan` says whether a NaN was seen (a max that skips NaNs does not see it).
STRIDER_HOST_DEVICE bool softmax_row_defined(float max_score, bool any_nan) {
  return !any_nan && max_score > -INFINITY && max_score < INFINITY;
}

}  // namespace strider
