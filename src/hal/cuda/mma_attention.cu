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
// Shared memory holds only the block's Q tile and one key tile of K (key-major) and V
// (transposed, key-contiguous: the layout the B fragment of P V wants), read through the
// views' strides: 16-byte loads where the innermost stride is 1 and rows and offsets are
// multiples of 8 elements, element loads otherwise (QKV chunks and head transposes in place).
//
// Semantics are the other kernels': keys past the last are -inf, a NaN score makes its row
// NaN (or 0 with zero_invalid_rows), a row of -inf only is undefined, P is rounded to T
// before P V as the tiled kernel does.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "hal/cuda/attention.h"
#include "hal/cuda/attention_steps.cuh"
#include "hal/cuda/launch.h"

namespace strider::cuda {
namespace {

using namespace device;

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarps = 4, kRowsPerWarp = 16, kBlockRows = kWarps * kRowsPerWarp, kKeyTile = 64;
constexpr int kKeyFragments = kKeyTile / 8;  // n = 8 columns of scores per mma
static_assert(kBlockRows == kTiledAttentionBlockRows);

// Shared tiles, in elements of T. Rows padded by 8 elements (16 bytes): a fragment's eight
// rows at 4-byte lane offsets then fall in 32 distinct banks, and 16-byte stores stay aligned.
template <int kHead>
struct MmaTiles {
  static constexpr int ld = kHead + 8;       // Q and K rows
  static constexpr int ld_v = kKeyTile + 8;  // V^T rows (one per value column)
  static constexpr int q = 0, k = q + kBlockRows * ld, vt = k + kKeyTile * ld, elements = vt + kHead * ld_v;
};

// D (+)= A B for one m16n8k16 fragment: A row-major 16 x 16, B column-major 16 x 8, f32 D.
template <typename T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two adjacent elements of a shared tile (at an even index) as one register.
template <typename T>
__device__ __forceinline__ uint32_t pair_at(const T* tile, int index) {
  return *reinterpret_cast<const uint32_t*>(tile + index);
}

// lo and hi rounded to T, lo in the low half (the lower column of an A fragment's pair).
template <typename T>
__device__ __forceinline__ uint32_t pack_pair(float lo, float hi) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  } else {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
}

// tile[r * ld + c] (or tile[c * ld + r] with `transpose`) = element (r0 + r, c) of a
// (rows x cols) operand at base + r * row + c * col, zero outside it, for r < tile_rows and
// c < tile_cols (a multiple of 16). The whole block loads.
template <typename T>
__device__ void load_tile(T* tile, int ld, bool transpose, int tile_rows, int tile_cols, const void* data,
                          int64_t base, int64_t row, int64_t col, int64_t r0, int64_t rows, int64_t cols) {
  const T* src = static_cast<const T*>(data);
  const bool vectors = col == 1 && row % 8 == 0 && base % 8 == 0 && cols % 8 == 0 &&
                       reinterpret_cast<uintptr_t>(data) % 16 == 0;
  if (vectors) {
    // Every load of a round is issued before the first store: one memory latency a round
    // instead of one a load (a 64 x 128 tile is 8 loads a thread).
    constexpr int kLoadsInFlight = 8;
    const int chunks = tile_cols / 8, total = tile_rows * chunks, threads = int(blockDim.x);
    for (int first = int(threadIdx.x); first < total; first += kLoadsInFlight * threads) {
      uint4 bits[kLoadsInFlight];
#pragma unroll
      for (int k = 0; k < kLoadsInFlight; ++k) {
        const int at = first + k * threads, r = at / chunks, c = at % chunks * 8;
        bits[k] = make_uint4(0, 0, 0, 0);
        if (at < total && r0 + r < rows && c < cols) bits[k] = *reinterpret_cast<const uint4*>(src + base + (r0 + r) * row + c);
      }
#pragma unroll
      for (int k = 0; k < kLoadsInFlight; ++k) {
        const int at = first + k * threads, r = at / chunks, c = at % chunks * 8;
        if (at >= total) continue;
        if (!transpose) {
          *reinterpret_cast<uint4*>(tile + r * ld + c) = bits[k];
        } else {
          const T* e = reinterpret_cast<const T*>(&bits[k]);
#pragma unroll
          for (int x = 0; x < 8; ++x) tile[(c + x) * ld + r] = e[x];
        }
      }
    }
    return;
  }
  for (int at = int(threadIdx.x); at < tile_rows * tile_cols; at += int(blockDim.x)) {
    const int r = at / tile_cols, c = at % tile_cols;
    const bool inside = r0 + r < rows && c < cols;
    tile[transpose ? c * ld + r : r * ld + c] = inside ? src[base + (r0 + r) * row + c * col] : T(0.0f);
  }
}

// One score step on this lane's 32 scores of a key tile (rows g and g + 8 of the warp's 16,
// columns 2t and 2t + 1 of each 8-key fragment), the kind fixed at compile time so that
// apply_score_step folds to one operation. An operand is read only inside the scores (a
// partial tile's outside scores become -inf after the steps). Where the operand's keys are
// contiguous and the tile is whole, a row's 16 elements are at fixed offsets from one
// pointer; other operands read each element through a call (inlined, their 32 64-bit
// addresses took the kernel from 156 to 204 registers).
// An operand element read through its strides, out of line: the path of strided keys and
// partial tiles, kept out of the unrolled tile so its addresses hold no registers there.
template <typename Operand>
__device__ __noinline__ float operand_at(const AttentionLaunch& a, int operand, int64_t row_at, int64_t j) {
  return float(load<Operand>(a.data[operand], row_at + j * a.col[operand]));
}

template <ScoreStepKind kKind, typename T>
__device__ __forceinline__ void step_on_tile(const AttentionLaunch& a, const int64_t (&base)[kAttentionOperands],
                                             int operand, float value, int64_t i0, int64_t j0,
                                             float (&s)[kKeyFragments][4]) {
  constexpr bool kReadsOperand = kKind == ScoreStepKind::kAdd || kKind == ScoreStepKind::kKeepWhere ||
                                 kKind == ScoreStepKind::kFillWhere;
  using Operand = std::conditional_t<kKind == ScoreStepKind::kAdd, T, bool>;
  const int lane = int(threadIdx.x % 32), g = lane / 4, t = lane % 4;
  const bool contiguous = kReadsOperand && a.col[operand] == 1 && j0 + kKeyTile <= a.keys;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int64_t i = i0 + g + 8 * half;
    const int64_t row_at = kReadsOperand ? base[operand] + i * a.row[operand] : 0;
    const Bits<Operand>* row = kReadsOperand ? static_cast<const Bits<Operand>*>(a.data[operand]) + row_at + j0 + 2 * t
                                             : nullptr;
#pragma unroll
    for (int n = 0; n < kKeyFragments; ++n)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        float x = 0;
        if constexpr (kReadsOperand) {
          const int64_t j = j0 + n * 8 + 2 * t + c;
          if (i < a.q_len && contiguous) {
            x = float(to_compute<Operand>(row[n * 8 + c]));
          } else if (i < a.q_len && j < a.keys) {
            x = operand_at<Operand>(a, operand, row_at, j);
          }
        }
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
__device__ __forceinline__ void score_steps_on_tile(const AttentionLaunch& a, const int64_t (&base)[kAttentionOperands],
                                                    int64_t i0, int64_t j0, float (&s)[kKeyFragments][4]) {
  int operand = 4;
  for (int k = 0; k < a.steps; ++k) {
    const float value = a.step_value[k];
    switch (a.step_kind[k]) {
      case ScoreStepKind::kMul: step_on_tile<ScoreStepKind::kMul, T>(a, base, operand, value, i0, j0, s); break;
      case ScoreStepKind::kDiv: step_on_tile<ScoreStepKind::kDiv, T>(a, base, operand, value, i0, j0, s); break;
      case ScoreStepKind::kAdd: step_on_tile<ScoreStepKind::kAdd, T>(a, base, operand, value, i0, j0, s); break;
      case ScoreStepKind::kKeepWhere:
        step_on_tile<ScoreStepKind::kKeepWhere, T>(a, base, operand, value, i0, j0, s);
        break;
      case ScoreStepKind::kFillWhere:
        step_on_tile<ScoreStepKind::kFillWhere, T>(a, base, operand, value, i0, j0, s);
        break;
    }
    if (step_reads_operand(a.step_kind[k])) ++operand;
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
// running max, this lane's share of the running sum, whether a NaN score was seen.
struct RowState {
  float max[2] = {-INFINITY, -INFINITY}, sum[2] = {0, 0};
  bool nan_seen[2] = {false, false};
};

// The score steps on a key tile's scores, then the online softmax: the scores become
// probabilities, `rescale` the factor for the output accumulated so far.
template <typename T>
__device__ __forceinline__ void softmax_tile(const AttentionLaunch& a, const int64_t (&base)[kAttentionOperands],
                                             int64_t i0, int64_t j0, float (&s)[kKeyFragments][4], RowState& state,
                                             float (&rescale)[2]) {
  score_steps_on_tile<T>(a, base, i0, j0, s);
  float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int n = 0; n < kKeyFragments; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int half = e / 2;
      const float v = s[n][e];
      state.nan_seen[half] |= isnan(v);
      tile_max[half] = fmaxf(tile_max[half], isnan(v) ? -INFINITY : v);
    }
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    // The four lanes of a row (t = 0..3) hold its 64 scores between them.
    tile_max[half] = fmaxf(tile_max[half], __shfl_xor_sync(kFullMask, tile_max[half], 1));
    tile_max[half] = fmaxf(tile_max[half], __shfl_xor_sync(kFullMask, tile_max[half], 2));
    const float next = fmaxf(state.max[half], tile_max[half]);
    // Every key so far -inf: nothing to add (p = 0, the output stays 0 and is not rescaled).
    rescale[half] = next == -INFINITY ? 1.0f : expf(state.max[half] - next);
    state.max[half] = next;
    state.sum[half] *= rescale[half];
  }
#pragma unroll
  for (int n = 0; n < kKeyFragments; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int half = e / 2;
      const float next = state.max[half];
      const float p = next == -INFINITY || isnan(s[n][e]) ? 0.0f : expf(s[n][e] - next);
      s[n][e] = p;
      state.sum[half] += p;
    }
}

template <typename T, int kHead>
__global__ void __launch_bounds__(32 * kWarps) mma_attention_kernel(const __grid_constant__ AttentionLaunch a) {
  using L = MmaTiles<kHead>;
  constexpr int kSteps = kHead / 16, kOutFragments = kHead / 8;
  extern __shared__ __align__(128) unsigned char shared[];
  T* q_tile = reinterpret_cast<T*>(shared) + L::q;
  T* k_tile = reinterpret_cast<T*>(shared) + L::k;
  T* vt_tile = reinterpret_cast<T*>(shared) + L::vt;
  const int warp = int(threadIdx.x / 32), lane = int(threadIdx.x % 32), g = lane / 4, t = lane % 4;
  const int head16 = int((a.head + 15) / 16 * 16), v_head16 = int((a.v_head + 15) / 16 * 16);
  const int64_t q_tiles = (a.q_len + kBlockRows - 1) / kBlockRows;
  for (int64_t tile = blockIdx.x; tile < a.batch.count * q_tiles; tile += gridDim.x) {
    int64_t base[kAttentionOperands];
    a.batch.offsets(tile / q_tiles, base);
    const int64_t q0 = tile % q_tiles * kBlockRows, i0 = q0 + warp * kRowsPerWarp;
    __syncthreads();  // the previous tile's last reads of the shared tiles are done
    load_tile(q_tile, L::ld, false, kBlockRows, head16, a.data[0], base[0], a.row[0], a.col[0], q0, a.q_len, a.head);
    __syncthreads();
    uint32_t qf[kSteps][4];
    const T* q_rows = q_tile + (warp * kRowsPerWarp + g) * L::ld + 2 * t;
#pragma unroll
    for (int k = 0; k < kSteps; ++k) {
      qf[k][0] = pair_at(q_rows, k * 16);
      qf[k][1] = pair_at(q_rows, 8 * L::ld + k * 16);
      qf[k][2] = pair_at(q_rows, k * 16 + 8);
      qf[k][3] = pair_at(q_rows, 8 * L::ld + k * 16 + 8);
    }
    float o[kOutFragments][4] = {};
    RowState state;
    for (int64_t j0 = 0; j0 < a.keys; j0 += kKeyTile) {
      __syncthreads();  // every warp is done with the last key tile
      // K's tile key-major (element (key, d) from Kt's (d, key)), V's transposed.
      load_tile(k_tile, L::ld, false, kKeyTile, head16, a.data[1], base[1], a.col[1], a.row[1], j0, a.keys, a.head);
      load_tile(vt_tile, L::ld_v, true, kKeyTile, v_head16, a.data[2], base[2], a.row[2], a.col[2], j0, a.keys, a.v_head);
      __syncthreads();
      float s[kKeyFragments][4] = {};
#pragma unroll
      for (int n = 0; n < kKeyFragments; ++n) {
        const T* k_row = k_tile + (n * 8 + g) * L::ld + 2 * t;
#pragma unroll
        for (int k = 0; k < kSteps; ++k)
          if (k * 16 < head16) mma_16816<T>(s[n], qf[k], pair_at(k_row, k * 16), pair_at(k_row, k * 16 + 8));
      }
      float rescale[2];
      softmax_tile<T>(a, base, i0, j0, s, state, rescale);
#pragma unroll
      for (int d = 0; d < kOutFragments; ++d) {
        o[d][0] *= rescale[0], o[d][1] *= rescale[0];
        o[d][2] *= rescale[1], o[d][3] *= rescale[1];
      }
#pragma unroll
      for (int k = 0; k < kKeyTile / 16; ++k) {
        // The scores' accumulators of keys 16k..16k+15 are P's A fragment for them.
        const uint32_t p[4] = {pack_pair<T>(s[2 * k][0], s[2 * k][1]), pack_pair<T>(s[2 * k][2], s[2 * k][3]),
                               pack_pair<T>(s[2 * k + 1][0], s[2 * k + 1][1]),
                               pack_pair<T>(s[2 * k + 1][2], s[2 * k + 1][3])};
#pragma unroll
        for (int d = 0; d < kOutFragments; ++d) {
          const T* v_row = vt_tile + (d * 8 + g) * L::ld_v + k * 16 + 2 * t;
          if (d * 8 < v_head16) mma_16816<T>(o[d], p, pair_at(v_row, 0), pair_at(v_row, 8));
        }
      }
    }
    // A row's sum and NaN flag are spread over its four lanes; every lane reaches the shuffles.
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float sum = state.sum[half];
      sum += __shfl_xor_sync(kFullMask, sum, 1);
      sum += __shfl_xor_sync(kFullMask, sum, 2);
      int nan_seen = int(state.nan_seen[half]);
      nan_seen |= __shfl_xor_sync(kFullMask, nan_seen, 1);
      nan_seen |= __shfl_xor_sync(kFullMask, nan_seen, 2);
      const bool defined = softmax_row_defined(state.max[half], nan_seen != 0);
      const float scale = row_output_scale(a, defined, sum);
      const int64_t i = i0 + g + 8 * half;
      if (i >= a.q_len) continue;
#pragma unroll
      for (int d = 0; d < kOutFragments; ++d)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int64_t column = d * 8 + 2 * t + e;
          if (column >= a.v_head) continue;
          const float y = scaled_output(scale, o[d][2 * half + e]);
          store<T>(const_cast<void*>(a.data[3]), base[3] + i * a.row[3] + column * a.col[3], y);
        }
    }
  }
}

template <typename T, int kHead>
cudaError_t launch_mma(const AttentionLaunch& a, cudaStream_t stream) {
  const int64_t tiles = a.batch.count * ((a.q_len + kBlockRows - 1) / kBlockRows);
  const unsigned blocks = unsigned(std::min<int64_t>(tiles, 1 << 20));
  const size_t bytes = sizeof(T) * size_t(MmaTiles<kHead>::elements);
  mma_attention_kernel<T, kHead><<<blocks, 32 * kWarps, bytes, stream>>>(a);
  return cudaGetLastError();
}

// The launcher for heads up to kHead, its shared memory allowed at creation (as tiled_launcher).
template <typename T, int kHead>
Result<AttentionLauncher> mma_launcher() {
  return allow_shared_memory(mma_attention_kernel<T, kHead>, sizeof(T) * size_t(MmaTiles<kHead>::elements),
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
