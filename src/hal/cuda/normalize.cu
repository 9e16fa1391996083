// The normalization family on the GPU (ops/normalization.h). Rows of up to 1024 elements
// along one strided dim take a warp each (normalize_rows_kernel, below); others a block
// per row (a group of elements sharing a mean and variance), threads striding over its
// inner elements. Two
// passes over the row for the statistics (the mean, then the squared deviations, each
// combined over the block in thread order), a third writes y, as the CPU kernel computes
// them; the accumulator is f32 for f32, f16 and bf16 (ONNX's stash_type) and f64 for f64.
#include <cstdlib>
#include <string_view>

#include "hal/cuda/launch.h"

namespace strider::cuda {
namespace {

using namespace device;

template <typename T>
using NormAcc = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename A>
__device__ __forceinline__ void store_statistic(DType dtype, void* base, int64_t offset, A value) {
  switch (dtype) {
    case DType::kF64: store<double>(base, offset, double(value)); break;
    case DType::kF16: store<__half>(base, offset, float(value)); break;
    case DType::kBF16: store<__nv_bfloat16>(base, offset, float(value)); break;
    default: store<float>(base, offset, float(value)); break;
  }
}

// The block's total of every thread's `value`, in every thread.
template <typename A>
__device__ __forceinline__ A block_sum(A value) {
  __shared__ A total;
  value = block_combine(value, A(0), [](A x, A y) { return x + y; });
  if (threadIdx.x == 0) total = value;
  __syncthreads();
  value = total;
  __syncthreads();  // `total` is rewritten by the next call
  return value;
}

template <typename T>
__global__ void __launch_bounds__(kThreads) normalize_kernel(const NormLaunch a) {
  using A = NormAcc<T>;
  const int64_t n = a.inner.count;
  for (int64_t r = blockIdx.x; r < a.rows.count; r += gridDim.x) {
    int64_t row[kNormLaunchOperands], off[4];
    strided_offsets(a.rows, a.rows_div, r, row);
    A mean = 0;
    if (a.subtract_mean) {
      A sum = 0;
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
        strided_offsets(a.inner, a.inner_div, j, off);
        sum += A(load<T>(a.x, row[0] + off[0]));
      }
      mean = n ? block_sum(sum) / A(n) : A(0);
    }
    A squares = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      strided_offsets(a.inner, a.inner_div, j, off);
      const A d = A(load<T>(a.x, row[0] + off[0])) - mean;
      squares += d * d;
    }
    const A var = n ? block_sum(squares) / A(n) : A(0);
    const A inv_std = a.epsilon_after_sqrt ? A(1) / (sqrt(var) + A(a.epsilon)) : A(1) / sqrt(var + A(a.epsilon));
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      strided_offsets(a.inner, a.inner_div, j, off);
      A value = (A(load<T>(a.x, row[0] + off[0])) - mean) * inv_std;
      if (a.scale) value *= A(load<T>(a.scale, row[2] + off[2]));
      if (a.bias) value += A(load<T>(a.bias, row[3] + off[3]));
      store<T>(a.y, row[1] + off[1], Compute<T>(value));
    }
    if (threadIdx.x == 0) {
      if (a.mean) store_statistic(a.stat_dtype, a.mean, row[4], mean);
      if (a.inv_std) store_statistic(a.stat_dtype, a.inv_std, row[5], inv_std);
    }
  }
}

template <typename T>
cudaError_t launch_normalize(const NormLaunch& l, cudaStream_t stream) {
  unsigned grid = unsigned(std::min<int64_t>(l.rows.count, 1 << 20));
  normalize_kernel<T><<<grid, l.block_threads, 0, stream>>>(l);
  return cudaGetLastError();
}

template <typename A>
__device__ __forceinline__ A warp_total(A value) {
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

// Rows of at most 32 * kPerLane elements along one strided dim (a transformer's LayerNorm
// over its hidden size): a warp per row, the row read once into registers (lane l holds
// elements l, l + 32, ...), the same two statistics passes over the registers, combined
// with shuffles instead of the block's shared memory. The block-per-row kernel read x three
// times and synchronized the block twice a row (BERT's [32 x 128, 256] bf16 LayerNorm ran
// at 144 GB/s on an H200).
constexpr int kRowWarps = 4;

template <typename T, int kPerLane>
__global__ void __launch_bounds__(32 * kRowWarps) normalize_rows_kernel(const NormLaunch a) {
  using A = NormAcc<T>;
  const int64_t n = a.inner.count;
  const int lane = int(threadIdx.x % 32);
  const int64_t sx = a.inner.strides[0][0], sy = a.inner.strides[1][0];
  const int64_t ss = a.inner.strides[2][0], sb = a.inner.strides[3][0];
  for (int64_t r = int64_t(blockIdx.x) * kRowWarps + threadIdx.x / 32; r < a.rows.count;
       r += int64_t(gridDim.x) * kRowWarps) {
    int64_t row[kNormLaunchOperands];
    strided_offsets(a.rows, a.rows_div, r, row);
    A v[kPerLane];
    A sum = 0;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int64_t j = lane + 32 * k;
      v[k] = j < n ? A(load<T>(a.x, row[0] + j * sx)) : A(0);
      sum += v[k];
    }
    const A mean = a.subtract_mean && n ? warp_total(sum) / A(n) : A(0);
    A squares = 0;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k)
      if (lane + 32 * k < n) squares += (v[k] - mean) * (v[k] - mean);
    const A var = n ? warp_total(squares) / A(n) : A(0);
    const A inv_std = a.epsilon_after_sqrt ? A(1) / (sqrt(var) + A(a.epsilon)) : A(1) / sqrt(var + A(a.epsilon));
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int64_t j = lane + 32 * k;
      if (j >= n) continue;
      A value = (v[k] - mean) * inv_std;
      if (a.scale) value *= A(load<T>(a.scale, row[2] + j * ss));
      if (a.bias) value += A(load<T>(a.bias, row[3] + j * sb));
      store<T>(a.y, row[1] + j * sy, Compute<T>(value));
    }
    if (lane == 0) {
      if (a.mean) store_statistic(a.stat_dtype, a.mean, row[4], mean);
      if (a.inv_std) store_statistic(a.stat_dtype, a.inv_std, row[5], inv_std);
    }
  }
}

template <typename T, int kPerLane>
cudaError_t launch_normalize_rows(const NormLaunch& l, cudaStream_t stream) {
  const unsigned grid = unsigned(std::min<int64_t>((l.rows.count + kRowWarps - 1) / kRowWarps, 1 << 20));
  normalize_rows_kernel<T, kPerLane><<<grid, 32 * kRowWarps, 0, stream>>>(l);
  return cudaGetLastError();
}

// The warp-per-row launcher for rows of one strided dim of up to 1024 elements, else null.
template <typename T>
NormLaunch::Launcher rows_launcher(const NormLaunch& l) {
  if (l.inner.rank != 1) return nullptr;
  if (l.inner.count <= 32 * 8) return &launch_normalize_rows<T, 8>;
  if (l.inner.count <= 32 * 32) return &launch_normalize_rows<T, 32>;
  return nullptr;
}

// The warp-per-row kernel where it applies; STRIDER_CUDA_NORMALIZE=block (a testing aid:
// the kernel suite runs its cases with both) takes the block-per-row one.
template <typename T>
NormLaunch::Launcher launcher_for(const NormLaunch& l) {
  const char* choice = std::getenv("STRIDER_CUDA_NORMALIZE");
  const bool block = choice && std::string_view(choice) == "block";
  if (NormLaunch::Launcher rows = block ? nullptr : rows_launcher<T>(l)) return rows;
  return &launch_normalize<T>;
}

}  // namespace

Status prepare_normalize(const NormSpec& s, NormLaunch* l) {
  *l = NormLaunch{};
  STRIDER_RETURN_IF_ERROR(make_indexer<kNormLaunchOperands>(s.row_sizes, s.row_strides, &l->rows));
  Shape inner_sizes = s.inner_sizes;
  std::vector<Strides> inner_strides = s.inner_strides;
  order_dims_by(s.inner_strides[0], inner_sizes, inner_strides);  // neighbouring threads, neighbouring x
  STRIDER_RETURN_IF_ERROR(make_indexer<4>(inner_sizes, inner_strides, &l->inner));
  make_fast_divisors(l->rows, l->rows_div);
  make_fast_divisors(l->inner, l->inner_div);
  l->x = s.x;
  l->y = s.y;
  l->scale = s.scale;
  l->bias = s.bias;
  l->mean = s.mean;
  l->inv_std = s.inv_std;
  l->stat_dtype = s.stat_dtype;
  l->epsilon = s.epsilon;
  l->subtract_mean = s.subtract_mean;
  l->epsilon_after_sqrt = s.epsilon_after_sqrt;
  int threads = 32;
  while (threads < kThreads && threads < l->inner.count) threads *= 2;
  l->block_threads = threads;
  switch (s.dtype) {
    case DType::kF32: l->launcher = launcher_for<float>(*l); break;
    case DType::kF16: l->launcher = launcher_for<__half>(*l); break;
    case DType::kBF16: l->launcher = launcher_for<__nv_bfloat16>(*l); break;
    case DType::kF64: l->launcher = &launch_normalize<double>; break;
    default: return unsupported(std::string("no CUDA normalization for ") + std::string(dtype_name(s.dtype)));
  }
  return Status::ok();
}

Status run_normalize(const NormLaunch& l, cudaStream_t stream) {
  if (l.rows.count == 0) return Status::ok();
  cudaError_t error = l.launcher(l, stream);
  if (error == cudaSuccess) return Status::ok();
  return device_error(std::string("normalization kernel launch failed: ") + cudaGetErrorString(error));
}

}  // namespace strider::cuda
