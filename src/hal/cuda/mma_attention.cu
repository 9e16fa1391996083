// FusedAttention's register-tiled kernel for bf16 and f16 (hal/cuda/attention.h), in the
// manner of FlashAttention-2: a block of four warps takes 64 query rows of one batch element
// and walks the keys 64 at a time; each warp owns 16 query rows and keeps everything of
// them in registers: its Q fragments, the 16 x 64 scores of a key tile, the online
// softmax's max and partial sums, and the 16 x head output accumulators. The two products
// are mma.sync m16n8k16 (bf16 / f16 in, f32 accumulation), and the scores' accumulator
// fragments are exactly the A fragments of P V once rounded to T, so P never goes through
// shared memory. The tiled kernel (tiled_attention.cu) kept scores, probabilities and
// output in shared memory between WMMA calls: 6 TFLOP/s on BERT's heads at batch 32.
//
// Shared memory holds only the block's Q tile, one key tile of K and V (both key-major; the
// B fragments come by ldmatrix, V's transposed) and the score steps' operands for it, read
// through the views' strides: 16-byte loads where the innermost stride is 1 and rows and
// offsets are multiples of 8 elements, element loads otherwise (QKV chunks and head
// transposes in place).
//
// Semantics are the other kernels': keys past the last are -inf, a NaN score makes its row
// NaN (or 0 with zero_invalid_rows), a row of -inf only is undefined, P is rounded to T
// before P V as the tiled kernel does.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "hal/cuda/dependent_launch.cuh"
#include "hal/cuda/attention.h"
#include "hal/cuda/attention_steps.cuh"
#include "hal/cuda/launch.h"
#include "hal/cuda/mma_tiles.cuh"

namespace strider::cuda {
namespace {

using namespace device;

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarps = 4, kThreads = 32 * kWarps, kRowsPerWarp = 16, kBlockRows = kWarps * kRowsPerWarp, kKeyTile = 64;
constexpr int kKeyFragments = kKeyTile / 8;  // n = 8 columns of scores per mma
// A staged score-step operand tile (load_step_operands): 64 query rows x 64 keys, rows
// padded as K's.
constexpr int kOperandLd = kKeyTile + 8, kOperandTile = kBlockRows * kOperandLd;
static_assert(kBlockRows == kTiledAttentionBlockRows);

// Shared tiles, in elements of T (mma_tiles.cuh): Q, then K and V key-major (element (key, d)),
// then one tile per score step that reads an operand.
template <int kHead>
struct MmaTiles {
  static constexpr int ld = kHead + 8;
  static constexpr int q = 0, k = q + kBlockRows * ld, v = k + kKeyTile * ld, operands = v + kKeyTile * ld;
  static constexpr int most_elements = operands + kMaxScoreSteps * kOperandTile;
};

// How many staged operand tiles a launch needs: one per score step that reads an operand.
inline int operand_tiles(const AttentionLaunch& a) {
  int tiles = 0;
  for (int k = 0; k < a.steps; ++k) tiles += step_reads_operand(a.step_kind[k]) ? 1 : 0;
  return tiles;
}

// The score steps' operands, staged in shared memory a key tile at a time beside K and V:
// the block's 64 query rows x 64 keys of each operand the steps read (one row where the
// operand is the same for every query, a row stride of 0: BERT's padding mask), as T (an
// additive operand is T already, a condition 0 or 1), zero outside the attention. The
// steps then read every operand at fixed offsets in shared memory with one code path;
// reading them from global memory took a fast path for contiguous keys and an out-of-line
// call for the rest, 132 KB of code for the 64-wide kernel.
template <typename T>
__device__ __forceinline__ void load_step_operands(T* tiles, const AttentionLaunch& a,
                                                   const int64_t (&base)[kAttentionOperands], int64_t q0, int64_t j0) {
  int operand = 4;
  T* tile = tiles;
  for (int k = 0; k < a.steps; ++k) {
    const ScoreStepKind kind = a.step_kind[k];
    if (!step_reads_operand(kind)) continue;
    const bool one_row = a.row[operand] == 0;
    if (kind == ScoreStepKind::kAdd)
      mma::stage_operand<T, T, kBlockRows, kKeyTile, kThreads>(tile, kOperandLd, a.data[operand], base[operand], a.row[operand],
                                                               a.col[operand], q0, a.q_len, j0, a.keys, one_row);
    else
      mma::stage_operand<T, bool, kBlockRows, kKeyTile, kThreads>(tile, kOperandLd, a.data[operand], base[operand],
                                                                  a.row[operand], a.col[operand], q0, a.q_len, j0, a.keys,
                                                                  one_row);
    ++operand;
    tile += kOperandTile;
  }
}

// One score step on this lane's 32 scores of a key tile (rows g and g + 8 of the warp's 16,
// columns 2t and 2t + 1 of each 8-key fragment), the kind fixed at compile time so that
// apply_score_step folds to one operation; `rows` is the step's staged operand tile (the
// warp's rows, or its one row).
template <ScoreStepKind kKind, typename T>
__device__ __forceinline__ void step_on_tile(const T* rows, int64_t row_step, float value, float (&s)[kKeyFragments][4]) {
  constexpr bool kReadsOperand = kKind == ScoreStepKind::kAdd || kKind == ScoreStepKind::kKeepWhere ||
                                 kKind == ScoreStepKind::kFillWhere;
  const int lane = int(threadIdx.x % 32), g = lane / 4, t = lane % 4;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const T* row = rows + (g + 8 * half) * row_step + 2 * t;
#pragma unroll
    for (int n = 0; n < kKeyFragments; ++n)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const float x = kReadsOperand ? float(row[n * 8 + c]) : 0.0f;
        s[n][2 * half + c] = apply_score_step(kKind, value, s[n][2 * half + c], x);
      }
  }
}

// The score steps (ops/attention_math.h) on a key tile's scores, one step at a time over
// the whole tile: the step's kind is the same for every lane, so each step is a branch to
// an unrolled run of one operation. (Per element, the steps' interpreter inlined into the
// 32 unrolled elements made the kernel too large for the instruction cache, and called out
// of line it cost a call per score.) Scores outside the attention become -inf.
template <typename T>
__device__ __forceinline__ void score_steps_on_tile(const AttentionLaunch& a, const T* operand_tiles, int64_t i0,
                                                    int64_t j0, float (&s)[kKeyFragments][4]) {
  const int warp = int(threadIdx.x / 32);
  int operand = 4;
  const T* tile = operand_tiles;
  for (int k = 0; k < a.steps; ++k) {
    const float value = a.step_value[k];
    // The warp's rows of the staged operand, or its one row for every query.
    const bool one_row = a.row[operand] == 0;
    const T* rows = tile + (one_row ? 0 : warp * kRowsPerWarp * kOperandLd);
    const int64_t row_step = one_row ? 0 : kOperandLd;
    switch (a.step_kind[k]) {
      case ScoreStepKind::kMul: step_on_tile<ScoreStepKind::kMul, T>(rows, row_step, value, s); break;
      case ScoreStepKind::kDiv: step_on_tile<ScoreStepKind::kDiv, T>(rows, row_step, value, s); break;
      case ScoreStepKind::kAdd: step_on_tile<ScoreStepKind::kAdd, T>(rows, row_step, value, s); break;
      case ScoreStepKind::kKeepWhere: step_on_tile<ScoreStepKind::kKeepWhere, T>(rows, row_step, value, s); break;
      case ScoreStepKind::kFillWhere: step_on_tile<ScoreStepKind::kFillWhere, T>(rows, row_step, value, s); break;
    }
    if (step_reads_operand(a.step_kind[k])) ++operand, tile += kOperandTile;
  }
  if (j0 + kKeyTile <= a.keys && i0 + kRowsPerWarp <= a.q_len) return;
  const int lane = int(threadIdx.x % 32), g = lane / 4, t = lane % 4;
#pragma unroll
  for (int n = 0; n < kKeyFragments; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      if (j0 + n * 8 + 2 * t + e % 2 >= a.keys || i0 + g + 8 * (e / 2) >= a.q_len) s[n][e] = -INFINITY;
}

// One warp's online-softmax state for its two rows per lane (g and g + 8 of its 16): the
// running max and this lane's share of the running sum. A NaN score is not tracked apart:
// its probability is NaN, so the row's sum is NaN at the end (softmax_row_defined's
// any_nan), and a NaN is never the max (fmaxf skips it).
struct RowState {
  float max[2] = {-INFINITY, -INFINITY}, sum[2] = {0, 0};
};

// 2^x by the special function unit (MUFU.EX2; a few ulp, subnormal results flushed to 0).
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
constexpr float kLog2e = 1.4426950408889634f;

// The score steps on a key tile's scores, then the online softmax: the scores become
// probabilities, `rescale` the factor for the output accumulated so far. A probability is
// 2^(s log2(e) - max log2(e)), one FFMA and one MUFU.EX2 as FlashAttention computes it,
// instead of expf(s - max) (about 15 instructions, and a NaN test, a score): it is within
// 2^-18 of expf's relative to it (the FFMA's argument error at scores of up to ~100), far
// below the rounding of P to T for P V (2^-9 in bf16, 2^-12 in f16).
template <typename T>
__device__ __forceinline__ void softmax_tile(const AttentionLaunch& a, const T* operand_tiles, int64_t i0, int64_t j0,
                                             float (&s)[kKeyFragments][4], RowState& state,
                                             float (&rescale)[2]) {
  score_steps_on_tile<T>(a, operand_tiles, i0, j0, s);
  float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int n = 0; n < kKeyFragments; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) tile_max[e / 2] = fmaxf(tile_max[e / 2], s[n][e]);
  float scaled_max[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    // The four lanes of a row (t = 0..3) hold its 64 scores between them.
    tile_max[half] = fmaxf(tile_max[half], __shfl_xor_sync(kFullMask, tile_max[half], 1));
    tile_max[half] = fmaxf(tile_max[half], __shfl_xor_sync(kFullMask, tile_max[half], 2));
    const float next = fmaxf(state.max[half], tile_max[half]);
    // Every key so far -inf: nothing to add (p = 0, the output stays 0 and is not rescaled).
    rescale[half] = next == -INFINITY ? 1.0f : exp2_approx((state.max[half] - next) * kLog2e);
    state.max[half] = next;
    state.sum[half] *= rescale[half];
    scaled_max[half] = next == -INFINITY ? 0.0f : next * kLog2e;  // then every s is -inf: p = 0
  }
#pragma unroll
  for (int n = 0; n < kKeyFragments; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float p = exp2_approx(fmaf(s[n][e], kLog2e, -scaled_max[e / 2]));
      s[n][e] = p;
      state.sum[e / 2] += p;
    }
}

template <typename T, int kHead>
__global__ void __launch_bounds__(kThreads) mma_attention_kernel(const __grid_constant__ AttentionLaunch a) {
  device::order_after_producers();
  using L = MmaTiles<kHead>;
  constexpr int kSteps = kHead / 16, kOutFragments = kHead / 8;
  static_assert(kSteps % 2 == 0 && kOutFragments % 2 == 0);
  extern __shared__ __align__(128) unsigned char shared[];
  T* q_tile = reinterpret_cast<T*>(shared) + L::q;
  T* k_tile = reinterpret_cast<T*>(shared) + L::k;
  T* v_tile = reinterpret_cast<T*>(shared) + L::v;
  T* step_tiles = reinterpret_cast<T*>(shared) + L::operands;
  const int warp = int(threadIdx.x / 32), lane = int(threadIdx.x % 32), g = lane / 4, t = lane % 4;
  // The rows this lane addresses for ldmatrix: row lane % 8 of matrix lane / 8.
  const int matrix = lane / 8, matrix_row = lane % 8;
  const int64_t q_tiles = (a.q_len + kBlockRows - 1) / kBlockRows;
  for (int64_t tile = blockIdx.x; tile < a.batch.count * q_tiles; tile += gridDim.x) {
    int64_t base[kAttentionOperands];
    a.batch.offsets(tile / q_tiles, base);
    const int64_t q0 = tile % q_tiles * kBlockRows, i0 = q0 + warp * kRowsPerWarp;
    // K read key-major: element (key, d) of Kt's (d, key).
    const bool q_chunks = mma::rows_in_chunks<T>(a.data[0], base[0], a.row[0], a.col[0], a.head);
    const bool k_chunks = mma::rows_in_chunks<T>(a.data[1], base[1], a.col[1], a.row[1], a.head);
    const bool v_chunks = mma::rows_in_chunks<T>(a.data[2], base[2], a.row[2], a.col[2], a.v_head);
    __syncthreads();  // the previous tile's last reads of the shared tiles are done
    mma::load_tile<T, kBlockRows, kHead, kThreads>(q_tile, L::ld, a.data[0], base[0], a.row[0], a.col[0], q0, a.q_len,
                                                   a.head, q_chunks);
    __syncthreads();
    uint32_t qf[kSteps][4];
    const T* q_rows = q_tile + (warp * kRowsPerWarp + g) * L::ld + 2 * t;
#pragma unroll
    for (int k = 0; k < kSteps; ++k) {
      qf[k][0] = mma::pair_at(q_rows, k * 16);
      qf[k][1] = mma::pair_at(q_rows, 8 * L::ld + k * 16);
      qf[k][2] = mma::pair_at(q_rows, k * 16 + 8);
      qf[k][3] = mma::pair_at(q_rows, 8 * L::ld + k * 16 + 8);
    }
    float o[kOutFragments][4] = {};
    RowState state;
    for (int64_t j0 = 0; j0 < a.keys; j0 += kKeyTile) {
      __syncthreads();  // every warp is done with the last key tile
      mma::load_tile<T, kKeyTile, kHead, kThreads>(k_tile, L::ld, a.data[1], base[1], a.col[1], a.row[1], j0, a.keys,
                                                   a.head, k_chunks);
      mma::load_tile<T, kKeyTile, kHead, kThreads>(v_tile, L::ld, a.data[2], base[2], a.row[2], a.col[2], j0, a.keys,
                                                   a.v_head, v_chunks);
      load_step_operands(step_tiles, a, base, q0, j0);
      __syncthreads();
      // S = Q K^T: K's tile rows are the B fragments' columns. One ldmatrix gives keys
      // 8n..8n+7 of two 16-wide steps of the head (columns past the head are zeros).
      float s[kKeyFragments][4] = {};
#pragma unroll
      for (int n = 0; n < kKeyFragments; ++n)
#pragma unroll
        for (int k = 0; k < kSteps; k += 2) {
          uint32_t b[4];
          mma::ldmatrix_x4(b, k_tile + (n * 8 + matrix_row) * L::ld + k * 16 + matrix * 8);
          mma::mma_16816<T>(s[n], qf[k], b[0], b[1]);
          mma::mma_16816<T>(s[n], qf[k + 1], b[2], b[3]);
        }
      float rescale[2];
      softmax_tile<T>(a, step_tiles, i0, j0, s, state, rescale);
#pragma unroll
      for (int d = 0; d < kOutFragments; ++d) {
        o[d][0] *= rescale[0], o[d][1] *= rescale[0];
        o[d][2] *= rescale[1], o[d][3] *= rescale[1];
      }
#pragma unroll
      for (int k = 0; k < kKeyTile / 16; ++k) {
        // The scores' accumulators of keys 16k..16k+15 are P's A fragment for them.
        const uint32_t p[4] = {mma::pack_pair<T>(s[2 * k][0], s[2 * k][1]), mma::pack_pair<T>(s[2 * k][2], s[2 * k][3]),
                               mma::pack_pair<T>(s[2 * k + 1][0], s[2 * k + 1][1]),
                               mma::pack_pair<T>(s[2 * k + 1][2], s[2 * k + 1][3])};
        // V's B fragments by a transposed ldmatrix of its key-major tile: keys 16k..16k+15
        // (matrices 0, 1 and 2, 3) of value columns 8d..8d+15.
#pragma unroll
        for (int d = 0; d < kOutFragments; d += 2) {
          uint32_t b[4];
          mma::ldmatrix_x4_transposed(b, v_tile + (k * 16 + matrix % 2 * 8 + matrix_row) * L::ld + (d + matrix / 2) * 8);
          mma::mma_16816<T>(o[d], p, b[0], b[1]);
          mma::mma_16816<T>(o[d + 1], p, b[2], b[3]);
        }
      }
    }
    const bool pairs = a.col[3] == 1 && base[3] % 2 == 0 && a.row[3] % 2 == 0 && a.v_head % 2 == 0 &&
                       reinterpret_cast<uintptr_t>(a.data[3]) % 4 == 0;
    // A row's sum is spread over its four lanes (NaN where a score was); every lane reaches the shuffles.
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float sum = state.sum[half];
      sum += __shfl_xor_sync(kFullMask, sum, 1);
      sum += __shfl_xor_sync(kFullMask, sum, 2);
      const bool defined = softmax_row_defined(state.max[half], isnan(sum));
      const float scale = row_output_scale(a, defined, sum);
      const int64_t i = i0 + g + 8 * half;
      if (i >= a.q_len) continue;
      const int64_t row_at = base[3] + i * a.row[3];
      if (pairs) {  // columns 2t and 2t + 1 of each fragment as one 4-byte store
        T* out = static_cast<T*>(const_cast<void*>(a.data[3])) + row_at;
#pragma unroll
        for (int d = 0; d < kOutFragments; ++d)
          if (d * 8 + 2 * t < a.v_head)
            *reinterpret_cast<uint32_t*>(out + d * 8 + 2 * t) = mma::pack_pair<T>(
                scaled_output(scale, o[d][2 * half]), scaled_output(scale, o[d][2 * half + 1]));
        continue;
      }
#pragma unroll
      for (int d = 0; d < kOutFragments; ++d)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int64_t column = d * 8 + 2 * t + e;
          if (column >= a.v_head) continue;
          store<T>(const_cast<void*>(a.data[3]), row_at + column * a.col[3], scaled_output(scale, o[d][2 * half + e]));
        }
    }
  }
}

template <typename T, int kHead>
cudaError_t launch_mma(const AttentionLaunch& a, cudaStream_t stream) {
  const int64_t tiles = a.batch.count * ((a.q_len + kBlockRows - 1) / kBlockRows);
  const unsigned blocks = unsigned(std::min<int64_t>(tiles, 1 << 20));
  const size_t bytes = sizeof(T) * size_t(MmaTiles<kHead>::operands + operand_tiles(a) * kOperandTile);
  launch_dependent(mma_attention_kernel<T, kHead>, blocks, kThreads, bytes, stream, a);
  return cudaGetLastError();
}

// The launcher for heads up to kHead, its shared memory allowed at creation (as tiled_launcher).
template <typename T, int kHead>
Result<AttentionLauncher> mma_launcher() {
  return allow_shared_memory(mma_attention_kernel<T, kHead>, sizeof(T) * size_t(MmaTiles<kHead>::most_elements),
                             "register-tiled attention", &launch_mma<T, kHead>);
}

}  // namespace

Result<AttentionLauncher> mma_attention_launcher(DType dtype, int64_t head, int64_t v_head) {
  return launcher_for_width(head, v_head, [dtype](auto width) -> Result<AttentionLauncher> {
    switch (dtype) {
      case DType::kBF16: return mma_launcher<__nv_bfloat16, decltype(width)::value>();
      case DType::kF16: return mma_launcher<__half, decltype(width)::value>();
      default: return AttentionLauncher(nullptr);
    }
  });
}

}  // namespace strider::cuda
