// FusedAttention on the GPU (ops/fused_attention.h): one warp per query row. The lanes take
// 32 keys at a time, each computing one score (the dot product through Q's and Kt's
// strides, then the score steps), and the row's softmax is kept online (a running max and
// sum, the partial output rescaled when the max grows), so the scores are never stored;
// then each key's probability is broadcast across the warp and the lanes add it times V's
// row into their share of the output (up to kAttentionLaneChunks elements each; wider value
// heads take more passes). All in f32 for f32, bf16 and f16 storage.
// Compiled by nvcc and the host compiler: no fmt.
#pragma once

#include <cuda_runtime.h>

#include "hal/cuda/indexer.h"
#include "ops/attention_math.h"

namespace strider::cuda {

// Q, Kt, V, the output, then up to kMaxScoreSteps step operands.
inline constexpr int kAttentionOperands = 4 + kMaxScoreSteps;
inline constexpr int kAttentionLaneChunks = 8;

struct AttentionLaunch {
  StridedIndexer<kAttentionOperands> batch;  // over the output's batch dims
  int64_t q_len = 0, head = 0, keys = 0, v_head = 0;
  int64_t row[kAttentionOperands] = {}, col[kAttentionOperands] = {};
  const void* data[kAttentionOperands] = {};  // data[3], the output, is written
  int steps = 0;
  ScoreStepKind step_kind[kMaxScoreSteps] = {};
  float step_value[kMaxScoreSteps] = {};
  bool zero_invalid_rows = false;
  cudaError_t (*launcher)(const AttentionLaunch&, cudaStream_t) = nullptr;
};

// UNSUPPORTED for a dtype other than f32, bf16, f16, or more batch dims than kMaxDims.
Status prepare_attention(DType dtype, const Shape& batch, const std::vector<Strides>& batch_strides,
                         AttentionLaunch* launch);
Status run_attention(const AttentionLaunch& launch, cudaStream_t stream);

}  // namespace strider::cuda
