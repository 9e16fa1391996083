// The score steps of a FusedAttention launch on the device, shared by the CUDA attention
// kernels (attention.cu, tiled_attention.cu, mma_attention.cu), and their launchers' shared
// memory allowance; nvcc only.
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

// What a row's output accumulators are multiplied by at the end: 1 / sum of its
// probabilities; 0 with no keys (or an undefined row under zero_invalid_rows), NaN for an
// undefined row otherwise (softmax_row_defined).
__device__ __forceinline__ float row_output_scale(const AttentionLaunch& a, bool defined, float sum) {
  return a.keys == 0 ? 0.0f : defined ? 1.0f / sum : (a.zero_invalid_rows ? 0.0f : NAN);
}
// An output element from its accumulator: a 0 or NaN scale wins over whatever the
// accumulator holds (an undefined row may have accumulated NaN or inf).
__device__ __forceinline__ float scaled_output(float scale, float accumulated) {
  return isnan(scale) ? NAN : scale == 0.0f ? 0.0f : accumulated * scale;
}

// `launcher` once `kernel` may have `bytes` of dynamic shared memory on the current device.
// Called where a FusedAttention kernel is created, on its device, not in a launch that a
// CUDA graph may be capturing. `what` names the kernel in the error.
template <typename KernelFunction>
Result<AttentionLauncher> allow_shared_memory(KernelFunction kernel, size_t bytes, const char* what,
                                              AttentionLauncher launcher) {
  cudaError_t error = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
  if (error != cudaSuccess)
    return device_error(std::string(what) + ": shared memory of " + std::to_string(bytes) + " bytes refused: " +
                        cudaGetErrorString(error));
  return launcher;
}

// pick(std::integral_constant<int, kHead>) for the narrowest compiled head width (64 or
// 128) that holds both heads; a null launcher for heads over kTiledAttentionHeadMax.
template <typename PickForWidth>
Result<AttentionLauncher> launcher_for_width(int64_t head, int64_t v_head, PickForWidth pick) {
  const int64_t widest = std::max(head, v_head);
  if (widest > kTiledAttentionHeadMax) return AttentionLauncher(nullptr);
  if (widest <= 64) return pick(std::integral_constant<int, 64>());
  return pick(std::integral_constant<int, 128>());
}

}  // namespace strider::cuda
