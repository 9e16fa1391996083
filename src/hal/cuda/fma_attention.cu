// FusedAttention's register-tiled kernel for f32 (hal/cuda/attention.h): exact f32 FMAs (no
// TF32: f32 stays f32), in the manner of FlashAttention-2 on CUDA cores. A block of 128
// threads takes 64 query rows of one batch element and walks the keys 64 at a time. Each
// thread owns 4 query rows and 8 keys of a tile's scores, and the same 4 rows of the output
// (head / 8 value columns): S, the online softmax's state and O stay in registers; shared
// memory holds Q, the key tile of K and V, the score steps' operands and P (the 8 threads of
// a row group share their probabilities through it, within one warp).
//
// Why: the tiled kernel (tiled_attention.cu) kept scores and output in shared memory and
// read one shared operand per FMA: 5 TFLOP/s on BERT's heads at batch 32 and 3.5 on Llama's
// (H100), 31-39% of those models' f32 time. Here a thread's step of the head dimension is
// three 16-byte shared loads for 32 FMAs (4 rows x 8 keys), and of P V twelve for 128.
//
// Thread t: key group kg = t % 8, row group rg = t / 8. Its rows are rg + 16 i (i < 4), so
// that the four row groups of a warp read four consecutive rows of P (conflict-free with
// rows of 68 floats); Q is stored transposed with those four rows side by side (slot
// rg * 4 + i), so one 16-byte load gives a thread its 4 rows at a head index. Its keys are
// kg * 4 + c and 32 + kg * 4 + c (c < 4), and its value columns 32 m + kg * 4 + c: the 8
// key groups of a warp then read 128 contiguous bytes.
//
// Semantics are the other kernels': keys past the last are -inf, a NaN score makes its row
// NaN (or 0 with zero_invalid_rows), a row of -inf only is undefined.
#include "hal/cuda/dependent_launch.cuh"
#include "hal/cuda/attention.h"
#include "hal/cuda/attention_steps.cuh"
#include "hal/cuda/launch.h"
#include "hal/cuda/mma_tiles.cuh"

namespace strider::cuda {
namespace {

using namespace device;

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kThreads = 128, kKeyTile = 64, kRowGroups = 16, kKeyGroups = 8;
constexpr int kKeys = kKeyTile / kKeyGroups;    // a thread's keys of a tile (8)
static_assert(kRowGroups * kKeyGroups == kThreads);
constexpr int kLd = kKeyTile + 4;           // Q^T, K^T and P rows (floats): 16-byte aligned, banks staggered
constexpr int kOperandLd = kKeyTile + 8;    // a staged score-step operand's rows
// kRows, a thread's query rows: 4, a block's 64 query rows (the tile tiled_attention_pays
// counts); or 2 or 1, 32 or 16 rows a block, for attentions of few query tiles (batch 1:
// 8 tiles of 64 for 132 SMs), half or a quarter of a thread's serial work
// (STRIDER_CUDA_FMA_ROWS, session 43, not yet measured).
template <int kRows>
inline constexpr int kBlockRowsOf = kRows * kRowGroups;
template <int kRows>
inline constexpr int kOperandTileOf = kBlockRowsOf<kRows> * kOperandLd;
static_assert(kBlockRowsOf<4> == kTiledAttentionBlockRows);

// Shared tiles, in floats: Q^T (head x 64 slots), K^T (head x 64 keys), V (64 keys x head),
// P (64 rows x 64 keys), then one tile per score step that reads an operand.
template <int kHead, int kRows>
struct FmaTiles {
  static constexpr int ld_v = kHead + 4;
  static constexpr int q = 0, k = q + kHead * kLd, v = k + kHead * kLd, p = v + kKeyTile * ld_v,
                       operands = p + kBlockRowsOf<kRows> * kLd;
  static constexpr int most_floats = operands + kMaxScoreSteps * kOperandTileOf<kRows>;
};

template <int kRows>
__device__ __forceinline__ int q_slot(int row) { return row % kRowGroups * kRows + row / kRowGroups; }
__device__ __forceinline__ int key_of(int kg, int e) { return e / 4 * 32 + kg * 4 + e % 4; }  // e < 8

// Element (r, c) of a (rows x cols) f32 operand at base + r * row + c * col, for r0 + r and c
// inside it and r < kR, c < kC, handed to put(r, c, value) (zero outside the operand). The
// block walks the tile in the operand's memory order: 16-byte loads where rows are whole
// chunks (mma::rows_in_chunks), else element loads along whichever stride is 1.
template <int kR, int kC, typename Put>
__device__ __forceinline__ void load_operand(const void* data, int64_t base, int64_t row, int64_t col, int64_t r0,
                                             int64_t rows, int64_t cols, Put put) {
  const float* src = static_cast<const float*>(data);
  const int thread = int(threadIdx.x);
  if (mma::rows_in_chunks<float>(data, base, row, col, cols)) {
    constexpr int kChunks = kC / 4;
    for (int at = thread; at < kR * kChunks; at += kThreads) {
      const int r = at / kChunks, c = at % kChunks * 4;
      float4 x = make_float4(0, 0, 0, 0);
      if (r0 + r < rows && c < cols) x = *reinterpret_cast<const float4*>(src + base + (r0 + r) * row + c);
      put(r, c, x.x), put(r, c + 1, x.y), put(r, c + 2, x.z), put(r, c + 3, x.w);
    }
  } else if (col == 1 || row != 1) {  // along the columns
    for (int at = thread; at < kR * kC; at += kThreads) {
      const int r = at / kC, c = at % kC;
      put(r, c, r0 + r < rows && c < cols ? src[base + (r0 + r) * row + c * col] : 0.0f);
    }
  } else {  // along the rows (row stride 1: a transposed view)
    for (int at = thread; at < kR * kC; at += kThreads) {
      const int c = at / kR, r = at % kR;
      put(r, c, r0 + r < rows && c < cols ? src[base + (r0 + r) * row + c * col] : 0.0f);
    }
  }
}

// One score step on a thread's kRows x 8 scores, its kind fixed at compile time; `tile` is the
// step's staged operand (row r at r * row_step: 0 where every query shares one row).
template <ScoreStepKind kKind, int kRows>
__device__ __forceinline__ void step_on_scores(const float* tile, int row_step, float value, float (&s)[kRows][kKeys]) {
  constexpr bool kReadsOperand = kKind == ScoreStepKind::kAdd || kKind == ScoreStepKind::kKeepWhere ||
                                 kKind == ScoreStepKind::kFillWhere;
  const int kg = int(threadIdx.x) % kKeyGroups, rg = int(threadIdx.x) / kKeyGroups;
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    const float* row = tile + (rg + kRowGroups * i) * row_step;
#pragma unroll
    for (int e = 0; e < kKeys; ++e) s[i][e] = apply_score_step(kKind, value, s[i][e], kReadsOperand ? row[key_of(kg, e)] : 0.0f);
  }
}

// The score steps on the tile's scores, one step at a time (a branch to an unrolled run of
// one operation, as the bf16 kernel does), then -inf outside the attention.
template <int kRows>
__device__ __forceinline__ void score_steps_on_tile(const AttentionLaunch& a, const float* operand_tiles, int64_t q0,
                                                    int64_t j0, float (&s)[kRows][kKeys]) {
  int operand = 4;
  const float* tile = operand_tiles;
  for (int k = 0; k < a.steps; ++k) {
    const float value = a.step_value[k];
    const int row_step = a.row[operand] == 0 ? 0 : kOperandLd;
    switch (a.step_kind[k]) {
      case ScoreStepKind::kMul: step_on_scores<ScoreStepKind::kMul, kRows>(tile, row_step, value, s); break;
      case ScoreStepKind::kDiv: step_on_scores<ScoreStepKind::kDiv, kRows>(tile, row_step, value, s); break;
      case ScoreStepKind::kAdd: step_on_scores<ScoreStepKind::kAdd, kRows>(tile, row_step, value, s); break;
      case ScoreStepKind::kKeepWhere: step_on_scores<ScoreStepKind::kKeepWhere, kRows>(tile, row_step, value, s); break;
      case ScoreStepKind::kFillWhere: step_on_scores<ScoreStepKind::kFillWhere, kRows>(tile, row_step, value, s); break;
    }
    if (step_reads_operand(a.step_kind[k])) ++operand, tile += kOperandTileOf<kRows>;
  }
  if (j0 + kKeyTile <= a.keys && q0 + kBlockRowsOf<kRows> <= a.q_len) return;
  const int kg = int(threadIdx.x) % kKeyGroups, rg = int(threadIdx.x) / kKeyGroups;
#pragma unroll
  for (int i = 0; i < kRows; ++i)
#pragma unroll
    for (int e = 0; e < kKeys; ++e)
      if (j0 + key_of(kg, e) >= a.keys || q0 + rg + kRowGroups * i >= a.q_len) s[i][e] = -INFINITY;
}

// The score steps' operands, staged a key tile at a time as the bf16 kernel stages them:
// the block's 64 query rows x 64 keys of each operand (its one row where the row stride is
// 0: BERT's padding mask), in f32 (a condition as 0 or 1), zero outside the attention.
// (mma::stage_operand's 16-byte chunks hold eight 16-bit elements, not f32.)
template <int kRows>
__device__ __forceinline__ void load_step_operands(float* tiles, const AttentionLaunch& a,
                                                   const int64_t (&base)[kAttentionOperands], int64_t q0, int64_t j0) {
  int operand = 4;
  float* tile = tiles;
  for (int k = 0; k < a.steps; ++k) {
    const ScoreStepKind kind = a.step_kind[k];
    if (!step_reads_operand(kind)) continue;
    const bool one_row = a.row[operand] == 0;
    const int64_t at = base[operand] + j0 * a.col[operand], row = a.row[operand], col = a.col[operand];
    const int64_t r0 = one_row ? 0 : q0, rows = one_row ? 1 : a.q_len, cols = a.keys - j0;
    if (kind == ScoreStepKind::kAdd) {
      load_operand<kBlockRowsOf<kRows>, kKeyTile>(a.data[operand], at, row, col, r0, rows, cols,
                                         [&](int r, int c, float x) { tile[r * kOperandLd + c] = x; });
    } else {
      for (int e = int(threadIdx.x); e < (one_row ? 1 : kBlockRowsOf<kRows>) * kKeyTile; e += kThreads) {
        const int r = e / kKeyTile, c = e % kKeyTile;
        const bool inside = r0 + r < rows && c < cols;
        tile[r * kOperandLd + c] = inside && load<bool>(a.data[operand], at + (r0 + r) * row + c * col) ? 1.0f : 0.0f;
      }
    }
    ++operand;
    tile += kOperandTileOf<kRows>;
  }
}

// A row's online softmax over a tile: scores become probabilities (as the tiled kernel,
// expf of s - max; a NaN score stays NaN, so the row's sum is NaN at the end), the row's max
// and this thread's share of its sum updated; returns the factor for the output so far. The
// row's 64 scores are spread over its 8 key-group lanes (consecutive lanes).
__device__ __forceinline__ float softmax_row(float (&s)[kKeys], float& max, float& sum) {
  float tile_max = -INFINITY;
#pragma unroll
  for (int e = 0; e < kKeys; ++e) tile_max = fmaxf(tile_max, s[e]);
#pragma unroll
  for (int lanes = 1; lanes < kKeyGroups; lanes *= 2) tile_max = fmaxf(tile_max, __shfl_xor_sync(kFullMask, tile_max, lanes));
  const float next = fmaxf(max, tile_max);
  // Every key so far -inf: nothing to add (p = 0, the output stays 0 and is not rescaled).
  const float rescale = next == -INFINITY ? 1.0f : expf(max - next);
  const float subtract = next == -INFINITY ? 0.0f : next;
  sum *= rescale;
#pragma unroll
  for (int e = 0; e < kKeys; ++e) {
    s[e] = expf(s[e] - subtract);
    sum += s[e];
  }
  max = next;
  return rescale;
}

// A thread's kRows query rows at head index d, from Q^T's slots (side by side).
template <int kRows>
__device__ __forceinline__ void q_rows_at(const float* q_tile, int d, int rg, float (&qr)[kRows]) {
  const float* at = q_tile + d * kLd + rg * kRows;
  if constexpr (kRows == 4) {
    const float4 q = *reinterpret_cast<const float4*>(at);
    qr[0] = q.x, qr[1] = q.y, qr[2] = q.z, qr[3] = q.w;
  } else if constexpr (kRows == 2) {
    const float2 q = *reinterpret_cast<const float2*>(at);
    qr[0] = q.x, qr[1] = q.y;
  } else {
    static_assert(kRows == 1);
    qr[0] = at[0];
  }
}

template <int kHead, int kRows>
__global__ void __launch_bounds__(kThreads) fma_attention_kernel(const __grid_constant__ AttentionLaunch a) {
  device::order_after_producers();
  using L = FmaTiles<kHead, kRows>;
  constexpr int kBlockRows = kBlockRowsOf<kRows>;
  constexpr int kColumns = kHead / kKeyGroups, kChunks = kColumns / 4;  // a thread's value columns
  static_assert(kHead % 32 == 0);
  extern __shared__ __align__(128) unsigned char shared[];
  float* q_tile = reinterpret_cast<float*>(shared) + L::q;
  float* k_tile = reinterpret_cast<float*>(shared) + L::k;
  float* v_tile = reinterpret_cast<float*>(shared) + L::v;
  float* p_tile = reinterpret_cast<float*>(shared) + L::p;
  float* step_tiles = reinterpret_cast<float*>(shared) + L::operands;
  const int kg = int(threadIdx.x) % kKeyGroups, rg = int(threadIdx.x) / kKeyGroups;
  const int head4 = int((a.head + 3) / 4 * 4);
  const int64_t q_tiles = (a.q_len + kBlockRows - 1) / kBlockRows;
  for (int64_t tile = blockIdx.x; tile < a.batch.count * q_tiles; tile += gridDim.x) {
    int64_t base[kAttentionOperands];
    a.batch.offsets(tile / q_tiles, base);
    const int64_t q0 = tile % q_tiles * kBlockRows;
    __syncthreads();  // the previous tile's last reads of the shared tiles are done
    load_operand<kBlockRows, kHead>(a.data[0], base[0], a.row[0], a.col[0], q0, a.q_len, a.head,
                                    [&](int r, int d, float x) { q_tile[d * kLd + q_slot<kRows>(r)] = x; });
    float o[kRows][kColumns] = {};
    float max[kRows], sum[kRows];
#pragma unroll
    for (int i = 0; i < kRows; ++i) max[i] = -INFINITY, sum[i] = 0;
    for (int64_t j0 = 0; j0 < a.keys; j0 += kKeyTile) {
      __syncthreads();  // every thread is done with the last key tile (and Q is stored)
      // K^T's tile (d, key) from Kt's (d, key); V's key-major.
      load_operand<kKeyTile, kHead>(a.data[1], base[1], a.col[1], a.row[1], j0, a.keys, a.head,
                                    [&](int key, int d, float x) { k_tile[d * kLd + key] = x; });
      load_operand<kKeyTile, kHead>(a.data[2], base[2], a.row[2], a.col[2], j0, a.keys, a.v_head,
                                    [&](int key, int c, float x) { v_tile[key * L::ld_v + c] = x; });
      load_step_operands<kRows>(step_tiles, a, base, q0, j0);
      __syncthreads();
      float s[kRows][kKeys] = {};
#pragma unroll 4
      for (int d = 0; d < head4; ++d) {
        float qr[kRows];
        q_rows_at<kRows>(q_tile, d, rg, qr);
        const float4 k0 = *reinterpret_cast<const float4*>(k_tile + d * kLd + kg * 4);
        const float4 k1 = *reinterpret_cast<const float4*>(k_tile + d * kLd + 32 + kg * 4);
        const float kr[kKeys] = {k0.x, k0.y, k0.z, k0.w, k1.x, k1.y, k1.z, k1.w};
#pragma unroll
        for (int i = 0; i < kRows; ++i)
#pragma unroll
          for (int e = 0; e < kKeys; ++e) s[i][e] = fmaf(qr[i], kr[e], s[i][e]);
      }
      score_steps_on_tile<kRows>(a, step_tiles, q0, j0, s);
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        const float rescale = softmax_row(s[i], max[i], sum[i]);
#pragma unroll
        for (int c = 0; c < kColumns; ++c) o[i][c] *= rescale;
        float* p_row = p_tile + (rg + kRowGroups * i) * kLd;
        *reinterpret_cast<float4*>(p_row + kg * 4) = make_float4(s[i][0], s[i][1], s[i][2], s[i][3]);
        *reinterpret_cast<float4*>(p_row + 32 + kg * 4) = make_float4(s[i][4], s[i][5], s[i][6], s[i][7]);
      }
      __syncwarp();  // a row group's 8 threads (one warp) wrote its rows of P
#pragma unroll 2
      for (int key = 0; key < kKeyTile; key += 4) {
        float4 p[kRows];
#pragma unroll
        for (int i = 0; i < kRows; ++i) p[i] = *reinterpret_cast<const float4*>(p_tile + (rg + kRowGroups * i) * kLd + key);
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
          float v[kColumns];
#pragma unroll
          for (int m = 0; m < kChunks; ++m) {
            const float4 x = *reinterpret_cast<const float4*>(v_tile + (key + kk) * L::ld_v + m * 32 + kg * 4);
            v[4 * m] = x.x, v[4 * m + 1] = x.y, v[4 * m + 2] = x.z, v[4 * m + 3] = x.w;
          }
#pragma unroll
          for (int i = 0; i < kRows; ++i) {
            const float pk = kk == 0 ? p[i].x : kk == 1 ? p[i].y : kk == 2 ? p[i].z : p[i].w;
#pragma unroll
            for (int c = 0; c < kColumns; ++c) o[i][c] = fmaf(pk, v[c], o[i][c]);
          }
        }
      }
    }
    // A row's sum is spread over its 8 lanes (NaN where a score was); every lane reaches the shuffles.
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      float total = sum[i];
#pragma unroll
      for (int lanes = 1; lanes < kKeyGroups; lanes *= 2) total += __shfl_xor_sync(kFullMask, total, lanes);
      const int64_t row = q0 + rg + kRowGroups * i;
      if (row >= a.q_len) continue;
      const float scale = row_output_scale(a, softmax_row_defined(max[i], isnan(total)), total);
      const int64_t row_at = base[3] + row * a.row[3];
#pragma unroll
      for (int c = 0; c < kColumns; ++c) {
        const int64_t column = c / 4 * 32 + kg * 4 + c % 4;
        if (column < a.v_head)
          store<float>(const_cast<void*>(a.data[3]), row_at + column * a.col[3], scaled_output(scale, o[i][c]));
      }
    }
  }
}

template <int kHead, int kRows>
cudaError_t launch_fma(const AttentionLaunch& a, cudaStream_t stream) {
  constexpr int kBlockRows = kBlockRowsOf<kRows>;
  const int64_t tiles = a.batch.count * ((a.q_len + kBlockRows - 1) / kBlockRows);
  const unsigned blocks = unsigned(std::min<int64_t>(tiles, 1 << 20));
  int operand_tiles = 0;
  for (int k = 0; k < a.steps; ++k) operand_tiles += step_reads_operand(a.step_kind[k]) ? 1 : 0;
  const size_t bytes = sizeof(float) * size_t(FmaTiles<kHead, kRows>::operands + operand_tiles * kOperandTileOf<kRows>);
  launch_dependent(fma_attention_kernel<kHead, kRows>, blocks, kThreads, bytes, stream, a);
  return cudaGetLastError();
}

template <int kHead, int kRows>
Result<AttentionLauncher> fma_launcher() {
  return allow_shared_memory(fma_attention_kernel<kHead, kRows>,
                             sizeof(float) * size_t(FmaTiles<kHead, kRows>::most_floats), "f32 register-tiled attention",
                             &launch_fma<kHead, kRows>);
}

template <int kHead>
Result<AttentionLauncher> fma_launcher_with_rows(int rows_per_thread) {
  switch (rows_per_thread) {
    case 1: return fma_launcher<kHead, 1>();
    case 2: return fma_launcher<kHead, 2>();
    default: return fma_launcher<kHead, 4>();
  }
}

}  // namespace

Result<AttentionLauncher> fma_attention_launcher(DType dtype, int64_t head, int64_t v_head, int rows_per_thread) {
  if (dtype != DType::kF32) return AttentionLauncher(nullptr);
  // Heads of up to 32 (Llama-style): a 32-wide kernel, half the work of the 64-wide one.
  if (std::max(head, v_head) <= 32) return fma_launcher_with_rows<32>(rows_per_thread);
  return launcher_for_width(head, v_head, [rows_per_thread](auto width) {
    return fma_launcher_with_rows<decltype(width)::value>(rows_per_thread);
  });
}

}  // namespace strider::cuda
