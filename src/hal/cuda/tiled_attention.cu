// FusedAttention's tiled kernel (hal/cuda/attention.h) for heads of up to 128: a block of
// four warps takes 64 query rows of one batch element and walks the keys 64 at a time.
// Each key tile of K and V is read from global memory once per 64 queries (the warp-per-row
// kernel read it once per query) into shared memory, through the views' strides, so QKV
// chunks and head transposes are read where they are. Each warp owns 16 query rows:
//   S = Q Kt on the tile (tensor cores for bf16 / f16, f32 FMAs for f32: f32 stays exact),
//   the score steps and the online softmax in f32 (two lanes a row), P stored as T,
//   O = O * rescale + P V (again tensor cores or FMAs), O kept in shared memory in f32.
// The softmax's semantics are the warp-per-row kernel's: keys past the last are -inf, a NaN
// score makes its row NaN (or 0 with zero_invalid_rows), a row of -inf only is undefined.
#include <mma.h>

#include "hal/cuda/dependent_launch.cuh"
#include "hal/cuda/attention.h"
#include "hal/cuda/attention_steps.cuh"
#include "hal/cuda/launch.h"

namespace strider::cuda {
namespace {

using namespace device;

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarps = 4, kRowsPerWarp = 16, kBlockRows = kWarps * kRowsPerWarp, kKeyTile = 64;
static_assert(kBlockRows == kTiledAttentionBlockRows);

// Row padding of the shared tiles (16 bytes: WMMA's ldm unit; it also staggers the banks).
template <typename T> constexpr int kPad = 16 / int(sizeof(T));

// The shared memory of a block, as offsets from its start (each 128-byte aligned).
template <typename T, int kHead>
struct TileLayout {
  static constexpr int ld = kHead + kPad<T>;            // Q, K, V rows (T)
  static constexpr int ld_s = kKeyTile + 4;              // a warp's scores (f32)
  static constexpr int ld_p = kKeyTile + kPad<T>;        // a warp's probabilities (T)
  static constexpr int ld_o = kHead + 4;                 // a warp's output accumulators (f32)
  static constexpr size_t align(size_t n) { return (n + 127) / 128 * 128; }
  static constexpr size_t q = 0;
  static constexpr size_t k = align(q + sizeof(T) * kBlockRows * ld);
  static constexpr size_t v = align(k + sizeof(T) * kKeyTile * ld);
  static constexpr size_t s = align(v + sizeof(T) * kKeyTile * ld);
  static constexpr size_t p = align(s + sizeof(float) * kWarps * kRowsPerWarp * ld_s);
  static constexpr size_t o = align(p + sizeof(T) * kWarps * kRowsPerWarp * ld_p);
  static constexpr size_t row_sum = align(o + sizeof(float) * kWarps * kRowsPerWarp * ld_o);
  static constexpr size_t bytes = align(row_sum + sizeof(float) * kBlockRows);
};

// C (16 x 16, f32, row-major, ldc) = [C +] A (16 x k, row-major) B (k x 16), B row-major
// (element (r, c) at b[r * ldb + c]) or column-major (at b[c * ldb + r]); k a multiple of 16.
// Tensor cores for 16-bit types (f32 accumulation of exact products); f32 FMAs for f32,
// each lane 8 outputs (row lane / 2, columns from (lane % 2) * 8).
template <typename T, bool kBColumnMajor>
__device__ __forceinline__ void warp_gemm(float* c, int ldc, const T* a, int lda, const T* b, int ldb, int k,
                                          bool accumulate) {
  if constexpr (std::is_same_v<T, float>) {
    const int lane = int(threadIdx.x % 32), row = lane / 2, col = (lane % 2) * 8;
    float acc[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[j] = accumulate ? c[row * ldc + col + j] : 0.0f;
    for (int kk = 0; kk < k; ++kk) {
      const float x = a[row * lda + kk];
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[j] = fmaf(x, kBColumnMajor ? b[(col + j) * ldb + kk] : b[kk * ldb + col + j], acc[j]);
    }
    __syncwarp();
#pragma unroll
    for (int j = 0; j < 8; ++j) c[row * ldc + col + j] = acc[j];
  } else {
    using namespace nvcuda;
    using BLayout = std::conditional_t<kBColumnMajor, wmma::col_major, wmma::row_major>;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    if (accumulate) wmma::load_matrix_sync(acc, c, ldc, wmma::mem_row_major);
    else wmma::fill_fragment(acc, 0.0f);
    for (int kk = 0; kk < k; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, BLayout> fb;
      wmma::load_matrix_sync(fa, a + kk, lda);
      wmma::load_matrix_sync(fb, kBColumnMajor ? b + kk : b + size_t(kk) * ldb, ldb);
      wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(c, acc, ldc, wmma::mem_row_major);
  }
}

// tile[r * ld + c] = element (r0 + r, c) of a (rows x cols) operand at base + r * row + c *
// col, zero outside it, for r < tile_rows and c < tile_cols (the whole block loads).
template <typename T>
__device__ void load_tile(T* tile, int ld, int tile_rows, int tile_cols, const void* data, int64_t base,
                          int64_t row, int64_t col, int64_t r0, int64_t rows, int64_t cols) {
  for (int at = int(threadIdx.x); at < tile_rows * tile_cols; at += int(blockDim.x)) {
    const int r = at / tile_cols, c = at % tile_cols;
    const bool inside = r0 + r < rows && c < cols;
    tile[r * ld + c] = inside ? static_cast<const T*>(data)[base + (r0 + r) * row + c * col] : T(0.0f);
  }
}

// One warp's online softmax over a key tile: its 16 rows of scores in `scores` become
// probabilities in `probs` (T), its output rows are rescaled, max / sum / nan updated.
// Two lanes a row, 32 keys each.
template <typename T, int kHead>
__device__ void softmax_tile(const AttentionLaunch& a, const int64_t (&base)[kAttentionOperands], int64_t i0,
                             int64_t j0, float* scores, T* probs, float* out, float& max, float& sum,
                             bool& nan_seen) {
  using L = TileLayout<T, kHead>;
  const int lane = int(threadIdx.x % 32), r = lane / 2, half = lane % 2;
  const int64_t i = i0 + r;
  float* s = scores + r * L::ld_s + half * 32;  // this lane's 32 scores, stepped in place
  float tile_max = -INFINITY;
  for (int c = 0; c < 32; ++c) {
    const int64_t j = j0 + half * 32 + c;
    const float v = j < a.keys && i < a.q_len ? score_steps<T>(a, base, i, j, s[c]) : -INFINITY;
    nan_seen |= isnan(v);
    s[c] = v;
    tile_max = fmaxf(tile_max, isnan(v) ? -INFINITY : v);
  }
  const float next = fmaxf(max, fmaxf(tile_max, __shfl_xor_sync(kFullMask, tile_max, 1)));
  // Every key so far -inf: nothing to add (p = 0, the output stays 0 and is not rescaled).
  const float rescale = next == -INFINITY ? 1.0f : expf(max - next);
  float tile_sum = 0;
  for (int c = 0; c < 32; ++c) {
    const float p = next == -INFINITY || isnan(s[c]) ? 0.0f : expf(s[c] - next);
    tile_sum += p;
    probs[r * L::ld_p + half * 32 + c] = T(p);
  }
  sum = sum * rescale + tile_sum + __shfl_xor_sync(kFullMask, tile_sum, 1);
  max = next;
  if (rescale != 1.0f)
    for (int e = half; e < kHead; e += 2) out[r * L::ld_o + e] *= rescale;
}

template <typename T, int kHead>
__global__ void __launch_bounds__(32 * kWarps) tiled_attention_kernel(const AttentionLaunch a) {
  device::order_after_producers();
  using L = TileLayout<T, kHead>;
  extern __shared__ __align__(128) unsigned char shared[];
  T* q_tile = reinterpret_cast<T*>(shared + L::q);
  T* k_tile = reinterpret_cast<T*>(shared + L::k);
  T* v_tile = reinterpret_cast<T*>(shared + L::v);
  const int warp = int(threadIdx.x / 32), lane = int(threadIdx.x % 32);
  float* scores = reinterpret_cast<float*>(shared + L::s) + warp * kRowsPerWarp * L::ld_s;
  T* probs = reinterpret_cast<T*>(shared + L::p) + warp * kRowsPerWarp * L::ld_p;
  float* out = reinterpret_cast<float*>(shared + L::o) + warp * kRowsPerWarp * L::ld_o;
  float* row_sum = reinterpret_cast<float*>(shared + L::row_sum) + warp * kRowsPerWarp;
  const int head16 = int((a.head + 15) / 16 * 16), v_head16 = int((a.v_head + 15) / 16 * 16);
  const int64_t q_tiles = (a.q_len + kBlockRows - 1) / kBlockRows;
  for (int64_t tile = blockIdx.x; tile < a.batch.count * q_tiles; tile += gridDim.x) {
    int64_t base[kAttentionOperands];
    a.batch.offsets(tile / q_tiles, base);
    const int64_t q0 = tile % q_tiles * kBlockRows, i0 = q0 + warp * kRowsPerWarp;
    __syncthreads();  // the previous tile's last reads of the shared tiles are done
    load_tile(q_tile, L::ld, kBlockRows, head16, a.data[0], base[0], a.row[0], a.col[0], q0, a.q_len, a.head);
    for (int at = lane; at < kRowsPerWarp * L::ld_o; at += 32) out[at] = 0.0f;
    float max = -INFINITY, sum = 0;
    bool nan_seen = false;
    for (int64_t j0 = 0; j0 < a.keys; j0 += kKeyTile) {
      __syncthreads();  // every warp is done with the last key tile
      // K's tile key-major (element (key, d) from Kt's (d, key)), V's key-major.
      load_tile(k_tile, L::ld, kKeyTile, head16, a.data[1], base[1], a.col[1], a.row[1], j0, a.keys, a.head);
      load_tile(v_tile, L::ld, kKeyTile, v_head16, a.data[2], base[2], a.row[2], a.col[2], j0, a.keys, a.v_head);
      __syncthreads();
      for (int n = 0; n < kKeyTile; n += 16)
        warp_gemm<T, true>(scores + n, L::ld_s, q_tile + warp * kRowsPerWarp * L::ld, L::ld, k_tile + n * L::ld,
                           L::ld, head16, false);
      __syncwarp();
      softmax_tile<T, kHead>(a, base, i0, j0, scores, probs, out, max, sum, nan_seen);
      __syncwarp();
      for (int m = 0; m < v_head16; m += 16)
        warp_gemm<T, false>(out + m, L::ld_o, probs, L::ld_p, v_tile + m, L::ld, kKeyTile, true);
      __syncwarp();
    }
    // The row's state lives in its two lanes; every lane of the warp writes each row. Every
    // lane must reach the shuffle: behind `nan_seen ||` the lanes that saw a NaN skipped it
    // and the warp deadlocked (a +inf key made the scores +inf - inf).
    const bool pair_nan_seen = __shfl_xor_sync(kFullMask, int(nan_seen), 1) != 0;
    const bool defined = softmax_row_defined(max, nan_seen || pair_nan_seen);
    const float scale = row_output_scale(a, defined, sum);
    if (lane % 2 == 0) row_sum[lane / 2] = scale;
    __syncwarp();
    for (int r = 0; r < kRowsPerWarp && i0 + r < a.q_len; ++r) {
      const float f = row_sum[r];
      for (int e = lane; e < a.v_head; e += 32) {
        const float y = scaled_output(f, out[r * L::ld_o + e]);
        store<T>(const_cast<void*>(a.data[3]), base[3] + (i0 + r) * a.row[3] + e * a.col[3], y);
      }
    }
  }
}

template <typename T, int kHead>
cudaError_t launch_tiled(const AttentionLaunch& a, cudaStream_t stream) {
  using L = TileLayout<T, kHead>;
  const int64_t tiles = a.batch.count * ((a.q_len + kBlockRows - 1) / kBlockRows);
  const unsigned blocks = unsigned(std::min<int64_t>(tiles, 1 << 20));
  launch_dependent(tiled_attention_kernel<T, kHead>, blocks, 32 * kWarps, L::bytes, stream, a);
  return cudaGetLastError();
}

// The launcher for heads up to kHead; its shared memory is allowed on the current device
// (the session's: kernels are created there) once here, at creation, not in a launch that
// a CUDA graph may be capturing.
template <typename T, int kHead>
Result<AttentionLauncher> tiled_launcher() {
  return allow_shared_memory(tiled_attention_kernel<T, kHead>, TileLayout<T, kHead>::bytes, "tiled attention",
                             &launch_tiled<T, kHead>);
}

}  // namespace

Result<AttentionLauncher> tiled_attention_launcher(DType dtype, int64_t head, int64_t v_head) {
  return launcher_for_width(head, v_head, [dtype](auto width) -> Result<AttentionLauncher> {
    switch (dtype) {
      case DType::kF32: return tiled_launcher<float, decltype(width)::value>();
      case DType::kBF16: return tiled_launcher<__nv_bfloat16, decltype(width)::value>();
      case DType::kF16: return tiled_launcher<__half, decltype(width)::value>();
      default: return AttentionLauncher(nullptr);
    }
  });
}

}  // namespace strider::cuda
