// FusedAttention's warp-per-row kernel and the choice between it and the tiled one
// (hal/cuda/attention.h).
#include "hal/cuda/dependent_launch.cuh"
#include "hal/cuda/attention.h"
#include "hal/cuda/attention_steps.cuh"
#include "hal/cuda/launch.h"

#include <algorithm>
#include <cstdlib>
#include <string_view>

namespace strider::cuda {
namespace {

using namespace device;

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarpsPerBlock = 4;

__device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

// Score of query row i (at q_base) against key j, through the steps.
template <typename T>
__device__ float score(const AttentionLaunch& a, const int64_t (&base)[kAttentionOperands], int64_t i, int64_t j) {
  float s = 0;
  const int64_t q = base[0] + i * a.row[0], kt = base[1] + j * a.col[1];
  for (int64_t d = 0; d < a.head; ++d) s += load<T>(a.data[0], q + d * a.col[0]) * load<T>(a.data[1], kt + d * a.row[1]);
  return score_steps<T>(a, base, i, j, s);
}

// Output elements [e0, e0 + 32 * kAttentionLaneChunks) of query row i.
template <typename T>
__device__ void attend(const AttentionLaunch& a, const int64_t (&base)[kAttentionOperands], int64_t i, int64_t e0) {
  const int lane = int(threadIdx.x % 32);
  float acc[kAttentionLaneChunks] = {};
  float max = -INFINITY, sum = 0;
  bool nan_seen = false;
  for (int64_t j0 = 0; j0 < a.keys; j0 += 32) {
    const int64_t j = j0 + lane;
    const bool key = j < a.keys;
    const float s = key ? score<T>(a, base, i, j) : -INFINITY;
    nan_seen |= isnan(s);
    const float next = fmaxf(max, warp_max(isnan(s) ? -INFINITY : s));  // the same in every lane
    if (next == -INFINITY) continue;  // every key so far is -inf: nothing to add yet
    const float rescale = expf(max - next);  // 0 while max is -inf
    const float p = key && !isnan(s) ? expf(s - next) : 0.0f;
    sum = sum * rescale + warp_sum(p);
#pragma unroll
    for (int c = 0; c < kAttentionLaneChunks; ++c) acc[c] *= rescale;
    const int count = int(a.keys - j0 < 32 ? a.keys - j0 : 32);
    for (int k = 0; k < count; ++k) {
      const float pk = __shfl_sync(kFullMask, p, k);
      const int64_t v_row = base[2] + (j0 + k) * a.row[2];
#pragma unroll
      for (int c = 0; c < kAttentionLaneChunks; ++c) {
        const int64_t e = e0 + c * 32 + lane;
        if (e < a.v_head) acc[c] += pk * load<T>(a.data[2], v_row + e * a.col[2]);
      }
    }
    max = next;
  }
  const bool defined = softmax_row_defined(max, __any_sync(kFullMask, nan_seen));
  for (int c = 0; c < kAttentionLaneChunks; ++c) {
    const int64_t e = e0 + c * 32 + lane;
    if (e >= a.v_head) continue;
    float y = acc[c] / sum;
    if (a.keys == 0) y = 0.0f;  // no keys: the product with an empty V is 0
    else if (!defined) y = a.zero_invalid_rows ? 0.0f : NAN;
    store<T>(const_cast<void*>(a.data[3]), base[3] + i * a.row[3] + e * a.col[3], y);
  }
}

template <typename T>
__global__ void __launch_bounds__(32 * kWarpsPerBlock) attention_kernel(const AttentionLaunch a) {
  device::order_after_producers();
  const int64_t rows = a.batch.count * a.q_len;
  const int64_t warps = int64_t(gridDim.x) * kWarpsPerBlock;
  for (int64_t r = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; r < rows; r += warps) {
    int64_t base[kAttentionOperands];
    a.batch.offsets(r / a.q_len, base);
    const int64_t width = a.v_head > 0 ? a.v_head : 1;
    for (int64_t e0 = 0; e0 < width; e0 += 32 * kAttentionLaneChunks) attend<T>(a, base, r % a.q_len, e0);
  }
}

template <typename T>
cudaError_t launch_attention(const AttentionLaunch& a, cudaStream_t stream) {
  const int64_t rows = a.batch.count * a.q_len;
  const unsigned blocks = unsigned(std::min<int64_t>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock, 1 << 20));
  launch_dependent(attention_kernel<T>, blocks, 32 * kWarpsPerBlock, 0, stream, a);
  return cudaGetLastError();
}

}  // namespace

int fma_rows_per_thread(int64_t heads, int64_t q_len, int multiprocessors) {
  if (const char* rows = std::getenv("STRIDER_CUDA_FMA_ROWS")) return std::atoi(rows);  // tests force each
  for (int rows : {4, 2}) {
    const int64_t block_rows = kTiledAttentionBlockRows / 4 * rows;
    if (heads * ((q_len + block_rows - 1) / block_rows) >= multiprocessors) return rows;
  }
  return 1;
}

Status prepare_attention(DType dtype, int64_t head, int64_t v_head, int64_t q_len, const Shape& batch,
                         const std::vector<Strides>& batch_strides, int multiprocessors, AttentionLaunch* launch) {
  std::vector<Strides> strides = batch_strides;
  strides.resize(size_t(kAttentionOperands), Strides(batch.size(), 0));
  STRIDER_RETURN_IF_ERROR(make_indexer<kAttentionOperands>(batch, strides, &launch->batch));
  switch (dtype) {
    case DType::kF32: launch->launcher = &launch_attention<float>; break;
    case DType::kBF16: launch->launcher = &launch_attention<__nv_bfloat16>; break;
    case DType::kF16: launch->launcher = &launch_attention<__half>; break;
    default: return unsupported(std::string("no CUDA FusedAttention for ") + std::string(dtype_name(dtype)));
  }
  const char* env = std::getenv("STRIDER_CUDA_ATTENTION");
  const std::string_view chosen = env ? env : "";
  if (chosen == "warp-per-row") return Status::ok();
  if (chosen != "tiled") {
    STRIDER_ASSIGN_OR_RETURN(AttentionLauncher mma, mma_attention_launcher(dtype, head, v_head));
    if (mma) {
      launch->launcher = mma;
      launch->kernel = "mma";
      return Status::ok();
    }
    const int rows = fma_rows_per_thread(launch->batch.count, q_len, multiprocessors);
    STRIDER_ASSIGN_OR_RETURN(AttentionLauncher fma, fma_attention_launcher(dtype, head, v_head, rows));
    if (fma) {
      launch->launcher = fma;
      launch->kernel = "fma";
      return Status::ok();
    }
  }
  STRIDER_ASSIGN_OR_RETURN(AttentionLauncher tiled, tiled_attention_launcher(dtype, head, v_head));
  if (tiled) {
    launch->launcher = tiled;
    launch->kernel = "tiled";
  }
  return Status::ok();
}

bool tiled_attention_pays(const AttentionShape& shape, int multiprocessors) {
  const bool tiled_dtype = shape.dtype == DType::kF32 || shape.dtype == DType::kBF16 || shape.dtype == DType::kF16;
  if (!tiled_dtype || std::max(shape.head, shape.v_head) > kTiledAttentionHeadMax || shape.q_len <= 0) return false;
  if (shape.dtype != DType::kF32) return true;  // the register-tiled kernel
  const int64_t tiles = shape.batch * ((shape.q_len + kTiledAttentionBlockRows - 1) / kTiledAttentionBlockRows);
  // Fewer tiles than SMs: each tile's block is the critical path, against the unfused
  // products and softmax (three launches). At 128 keys, Llama's 32-wide heads (8192 FMAs a
  // query row) ran faster fused at batch 1 (0.313 -> 0.286 ms, H100), BERT's 64-wide ones
  // (16384) slower (0.248 -> 0.303).
  constexpr int64_t kMostRowWorkAlone = 8192;
  return tiles >= multiprocessors || shape.keys * (shape.head + shape.v_head) <= kMostRowWorkAlone;
}

Status run_attention(const AttentionLaunch& a, cudaStream_t stream) {
  if (a.batch.count * a.q_len == 0 || a.v_head == 0) return Status::ok();
  cudaError_t error = a.launcher(a, stream);
  if (error == cudaSuccess) return Status::ok();
  return device_error(std::string("attention kernel launch failed: ") + cudaGetErrorString(error));
}

}  // namespace strider::cuda
