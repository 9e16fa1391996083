// FusedAttention on the GPU (ops/fused_attention.h), four kernels with one semantics (the
// score steps of ops/attention_math.h, then an online softmax, so the scores are never
// stored; a NaN score or a row of -inf only makes the row NaN, or 0 with zero_invalid_rows):
// - register-tiled (mma_attention.cu), for bf16 / f16 heads of up to
//   kTiledAttentionHeadMax: FlashAttention-2's scheme, a warp's 16 query rows, their scores,
//   probabilities and output in registers, both products as mma.sync on tensor cores (f32
//   accumulation), K and V through shared memory a 64-key tile at a time.
// - f32 register-tiled (fma_attention.cu), for f32 heads of up to kTiledAttentionHeadMax:
//   the same scheme on CUDA cores (exact f32 FMAs), a thread's 4 query rows x 8 keys of
//   scores and its 4 rows of the output in registers, P shared by a row's 8 lanes through
//   shared memory.
// - tiled (tiled_attention.cu), for query and value heads of up to kTiledAttentionHeadMax:
//   a block takes 64 query rows of one batch element, K and V come through shared memory a
//   64-key tile at a time, read once per 64 queries; the two products of each tile run on
//   tensor cores through WMMA for bf16 / f16 (scores and output kept in shared memory) and
//   as f32 FMAs for f32 (no TF32: f32 stays exact), operands and results through shared
//   memory between the products (the f32 kernel until session 32: 3.5-5 TFLOP/s).
// - warp per row (attention.cu), for wider heads: one warp per query row, the lanes take
//   32 keys at a time, each computing one score through Q's and Kt's strides, then each
//   key's probability is broadcast across the warp and the lanes add it times V's row into
//   their share of the output (up to kAttentionLaneChunks elements each; wider value heads
//   take more passes). All in f32 for f32, bf16 and f16 storage.
// All read every operand through its strides (QKV chunks and head transposes in place).
// A FusedAttention kernel takes the first that applies; STRIDER_CUDA_ATTENTION=tiled or
// warp-per-row (testing aids: the kernel suite runs every attention case with each) takes
// the others. Whether a session fuses attention at all is tiled_attention_pays's answer.
// Compiled by nvcc and the host compiler: no fmt.
#pragma once

#include <cuda_runtime.h>

#include "hal/cuda/indexer.h"
#include "ops/attention_math.h"
#include "ops/fused_attention.h"

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
  const char* kernel = "warp-per-row";  // or "tiled": for profiles and inspect
};
using AttentionLauncher = cudaError_t (*)(const AttentionLaunch&, cudaStream_t);

inline constexpr int64_t kTiledAttentionHeadMax = 128;
inline constexpr int64_t kTiledAttentionBlockRows = 64;  // query rows of one block

// Whether an attention of these sizes runs faster fused than as cuBLASLt products and a
// softmax on a GPU of `multiprocessors` SMs. bf16 / f16 (the register-tiled kernel): at
// every size; since session 23 it is faster at batch 1 too (H100, BERT-, GPT-2- and
// Llama-style layers of 128 tokens, whole models 0.173 -> 0.152, 0.151 -> 0.141, 0.221 ->
// 0.181 ms), 8-16 query tiles for 132 SMs notwithstanding. f32 (exact FMAs): only when
// its query tiles fill the GPU: the tiled kernel took 0.61-0.78x the unfused time at batch
// 32 (384-768 tiles, H200) and 2x at batch 1 (0.27 -> 0.55 ms on those models, H100); the
// f32 register-tiled kernel (session 32) still made BERT and GPT-2 at batch 1 slower
// (0.248 -> 0.303 ms, H100) and Llama faster (0.313 -> 0.286): with fewer tiles than SMs,
// f32 is fused where a query row's work (keys x (head + v_head)) is at most Llama's. With
// 16-row blocks (fma_rows_per_thread, session 44, H200) fused BERT and GPT-2 b1 f32 were
// still slower (0.2558 -> 0.2956, 0.2483 -> 0.2836 ms) and Llama faster (0.2665 -> 0.2373).
bool tiled_attention_pays(const AttentionShape& shape, int multiprocessors);
// The tiled kernel's launcher for these heads, or null where it does not apply (a head over
// kTiledAttentionHeadMax, a dtype other than f32, bf16, f16). Allows the kernel its shared
// memory on the current device: call it where the kernel is created, on its device.
Result<AttentionLauncher> tiled_attention_launcher(DType dtype, int64_t head, int64_t v_head);

// The register-tiled kernel's launcher (mma_attention.cu) for bf16 / f16 heads of up to
// kTiledAttentionHeadMax, or null where it does not apply; as tiled_attention_launcher,
// call it where the kernel is created.
Result<AttentionLauncher> mma_attention_launcher(DType dtype, int64_t head, int64_t v_head);

// The f32 register-tiled kernel's launcher (fma_attention.cu) for f32 heads of up to
// kTiledAttentionHeadMax, or null where it does not apply; as tiled_attention_launcher.
// `rows_per_thread` 4 (blocks of 64 query rows), 2 or 1 (32 or 16 rows: more blocks for
// batch-1 attentions); fma_rows_per_thread chooses.
Result<AttentionLauncher> fma_attention_launcher(DType dtype, int64_t head, int64_t v_head, int rows_per_thread = 4);
// The f32 kernel's query rows a thread for `heads` attentions (the batch dims' product) of
// q_len queries on `multiprocessors` SMs: the most rows (4, then 2) whose blocks still
// number at least the SMs, else 1. On an H200, Llama b1 f32 (16 blocks of 64 rows) took
// 0.2665 ms with 4, 0.2486 with 2 and 0.2373 with 1 (session 44); batch 32's hundreds of
// tiles keep 4. STRIDER_CUDA_FMA_ROWS overrides it (the kernel suite runs each).
int fma_rows_per_thread(int64_t heads, int64_t q_len, int multiprocessors);

// Picks the kernel for these heads: a register-tiled one (mma for bf16 / f16, fma for f32,
// its rows a thread by fma_rows_per_thread), else the tiled one, where they apply.
// UNSUPPORTED for a dtype other than f32, bf16, f16, or more batch dims than kMaxDims.
Status prepare_attention(DType dtype, int64_t head, int64_t v_head, int64_t q_len, const Shape& batch,
                         const std::vector<Strides>& batch_strides, int multiprocessors, AttentionLaunch* launch);
Status run_attention(const AttentionLaunch& launch, cudaStream_t stream);

}  // namespace strider::cuda
