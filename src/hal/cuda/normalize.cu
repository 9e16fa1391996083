// The normalization family on the GPU (ops/normalization.h). Rows of up to 1024 elements
// along one strided dim take a warp each (normalize_rows_kernel, below, or
// normalize_dense_rows_kernel where the rows are dense in 16-byte chunks); others a block
// per row (a group of elements sharing a mean and variance), threads striding over its
// inner elements. Two
// passes over the row for the statistics (the mean, then the squared deviations, each
// combined over the block in thread order), a third writes y, as the CPU kernel computes
// them; the accumulator is f32 for f32, f16 and bf16 (ONNX's stash_type) and f64 for f64.
#include <cstdlib>
#include <string_view>

#include "hal/cuda/dependent_launch.cuh"
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

// 1 / sqrt(var + epsilon), or 1 / (sqrt(var) + epsilon) where the op adds it after.
template <typename A>
__device__ __forceinline__ A inverse_std(const NormLaunch& a, A var) {
  return a.epsilon_after_sqrt ? A(1) / (sqrt(var) + A(a.epsilon)) : A(1) / sqrt(var + A(a.epsilon));
}

// The row's statistics, for the outputs the node has (LayerNormalization's Mean, InvStdDev).
template <typename A>
__device__ __forceinline__ void store_row_statistics(const NormLaunch& a, const int64_t* row, A mean, A inv_std) {
  if (a.mean) store_statistic(a.stat_dtype, a.mean, row[4], mean);
  if (a.inv_std) store_statistic(a.stat_dtype, a.inv_std, row[5], inv_std);
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
  device::order_after_producers();
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
    const A inv_std = inverse_std(a, var);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      strided_offsets(a.inner, a.inner_div, j, off);
      A value = (A(load<T>(a.x, row[0] + off[0])) - mean) * inv_std;
      if (a.scale) value *= A(load<T>(a.scale, row[2] + off[2]));
      if (a.bias) value += A(load<T>(a.bias, row[3] + off[3]));
      store<T>(a.y, row[1] + off[1], Compute<T>(value));
    }
    if (threadIdx.x == 0) store_row_statistics(a, row, mean, inv_std);
  }
}

template <typename T>
cudaError_t launch_normalize(const NormLaunch& l, cudaStream_t stream) {
  unsigned grid = unsigned(std::min<int64_t>(l.rows.count, 1 << 20));
  launch_dependent(normalize_kernel<T>, grid, l.block_threads, 0, stream, l);
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
  device::order_after_producers();
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
    const A inv_std = inverse_std(a, var);
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int64_t j = lane + 32 * k;
      if (j >= n) continue;
      A value = (v[k] - mean) * inv_std;
      if (a.scale) value *= A(load<T>(a.scale, row[2] + j * ss));
      if (a.bias) value += A(load<T>(a.bias, row[3] + j * sb));
      store<T>(a.y, row[1] + j * sy, Compute<T>(value));
    }
    if (lane == 0) store_row_statistics(a, row, mean, inv_std);
  }
}

// A warp-per-row kernel: kRowWarps rows a block.
template <auto kKernel>
cudaError_t launch_warp_rows(const NormLaunch& l, cudaStream_t stream) {
  const unsigned grid = unsigned(std::min<int64_t>((l.rows.count + kRowWarps - 1) / kRowWarps, 1 << 20));
  launch_dependent(kKernel, grid, 32 * kRowWarps, 0, stream, l);
  return cudaGetLastError();
}

// The warp-per-row kernel over dense rows: lane l holds the 16-byte chunks l, l + 32, ...
// (kChunks of them), read and written with one vector access each where the scalar
// kernel above makes 8 (bf16) or 4 (f32): BERT's and Llama's rows of 256 take one chunk a
// lane. Same statistics, summed in another order.
template <typename T>
inline constexpr int kNormChunk = int(16 / sizeof(T));
template <typename T>
struct alignas(16) NormChunk {
  T v[kNormChunk<T>];
};

template <typename T, int kChunks>
__global__ void __launch_bounds__(32 * kRowWarps) normalize_dense_rows_kernel(const NormLaunch a) {
  device::order_after_producers();
  using A = NormAcc<T>;
  constexpr int V = kNormChunk<T>;
  const int64_t n = a.inner.count;
  const int lane = int(threadIdx.x % 32);
  for (int64_t r = int64_t(blockIdx.x) * kRowWarps + threadIdx.x / 32; r < a.rows.count;
       r += int64_t(gridDim.x) * kRowWarps) {
    int64_t row[kNormLaunchOperands];
    strided_offsets(a.rows, a.rows_div, r, row);
    A v[kChunks][V];
    A sum = 0;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int64_t j = int64_t(c * 32 + lane) * V;
      const NormChunk<T> in = j < n ? *reinterpret_cast<const NormChunk<T>*>(static_cast<const T*>(a.x) + row[0] + j)
                                    : NormChunk<T>{};
#pragma unroll
      for (int e = 0; e < V; ++e) {
        v[c][e] = A(to_compute<T>(in.v[e]));
        sum += v[c][e];
      }
    }
    const A mean = a.subtract_mean && n ? warp_total(sum) / A(n) : A(0);
    A squares = 0;
#pragma unroll
    for (int c = 0; c < kChunks; ++c)
      if (int64_t(c * 32 + lane) * V < n)
#pragma unroll
        for (int e = 0; e < V; ++e) squares += (v[c][e] - mean) * (v[c][e] - mean);
    const A var = n ? warp_total(squares) / A(n) : A(0);
    const A inv_std = inverse_std(a, var);
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int64_t j = int64_t(c * 32 + lane) * V;
      if (j >= n) continue;
      NormChunk<T> scale{}, bias{}, out;
      if (a.scale) scale = *reinterpret_cast<const NormChunk<T>*>(static_cast<const T*>(a.scale) + row[2] + j);
      if (a.bias) bias = *reinterpret_cast<const NormChunk<T>*>(static_cast<const T*>(a.bias) + row[3] + j);
#pragma unroll
      for (int e = 0; e < V; ++e) {
        A value = (v[c][e] - mean) * inv_std;
        if (a.scale) value *= A(to_compute<T>(scale.v[e]));
        if (a.bias) value += A(to_compute<T>(bias.v[e]));
        out.v[e] = to_bits<T>(Compute<T>(value));
      }
      *reinterpret_cast<NormChunk<T>*>(static_cast<T*>(a.y) + row[1] + j) = out;
    }
    if (lane == 0) store_row_statistics(a, row, mean, inv_std);
  }
}

// Whether x, y and the scale and bias (those given) are dense along the row, in whole
// 16-byte chunks from 16-byte aligned row starts.
template <typename T>
bool rows_in_chunks(const NormLaunch& l) {
  constexpr int V = kNormChunk<T>;
  const void* data[4] = {l.x, l.y, l.scale, l.bias};
  if (l.inner.rank != 1 || l.inner.count % V != 0) return false;
  for (int k = 0; k < 4; ++k) {
    if (!data[k]) continue;
    if (l.inner.strides[k][0] != 1 || reinterpret_cast<uintptr_t>(data[k]) % 16 != 0) return false;
    for (int d = 0; d < l.rows.rank; ++d)
      if (l.rows.strides[k][d] % V != 0) return false;
  }
  return true;
}

// The warp-per-row launchers for rows of one strided dim of up to 1024 elements (dense
// ones in chunks unless `scalar`), else null.
template <typename T>
NormLaunch::Launcher rows_launcher(const NormLaunch& l, bool scalar) {
  if (l.inner.rank != 1) return nullptr;
  constexpr int64_t kLaneChunks = 32 * kNormChunk<T>;
  if (!scalar && rows_in_chunks<T>(l)) {
    if (l.inner.count <= kLaneChunks) return &launch_warp_rows<normalize_dense_rows_kernel<T, 1>>;
    if (l.inner.count <= 4 * kLaneChunks) return &launch_warp_rows<normalize_dense_rows_kernel<T, 4>>;
  }
  if (l.inner.count <= 32 * 8) return &launch_warp_rows<normalize_rows_kernel<T, 8>>;
  if (l.inner.count <= 32 * 32) return &launch_warp_rows<normalize_rows_kernel<T, 32>>;
  return nullptr;
}

// The warp-per-row kernels where they apply. Testing aids (the kernel suite runs its cases
// with each): STRIDER_CUDA_NORMALIZE=block takes the block-per-row kernel, =rows the
// scalar warp-per-row one.
template <typename T>
NormLaunch::Launcher launcher_for(const NormLaunch& l) {
  const char* choice = std::getenv("STRIDER_CUDA_NORMALIZE");
  const std::string_view chosen = choice ? choice : "";
  if (NormLaunch::Launcher rows = chosen == "block" ? nullptr : rows_launcher<T>(l, chosen == "rows")) return rows;
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
