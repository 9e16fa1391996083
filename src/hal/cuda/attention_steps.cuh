// The score steps of a FusedAttention launch on the device, shared by both CUDA attention
// kernels (attention.cu, tiled_attention.cu); nvcc only.
#pragma once

#include "hal/cuda/attention.h"
#include "hal/cuda/launch.h"

namespace strider::cuda {

// The steps on s, the score of query i and key j: an additive operand is read as T (the
// attention's dtype), a condition as bool, each at (i, j) through its strides.
template <typename T>
__device__ __forceinline__ float score_steps(const AttentionLaunch& a, const int64_t (&base)[kAttentionOperands],
                                             int64_t i, int64_t j, float s) {
  int operand = 4;
  for (int k = 0; k < a.steps; ++k) {
    const ScoreStepKind kind = a.step_kind[k];
    float x = 0;
    if (step_reads_operand(kind)) {
      const int64_t at = base[operand] + i * a.row[operand] + j * a.col[operand];
      x = kind == ScoreStepKind::kAdd ? device::load<T>(a.data[operand], at)
                                      : (device::load<bool>(a.data[operand], at) ? 1.0f : 0.0f);
      ++operand;
    }
    s = apply_score_step(kind, a.step_value[k], s, x);
  }
  return s;
}

}  // namespace strider::cuda
