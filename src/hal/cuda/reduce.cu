// Reductions (ReduceSum/Mean/Max/Min, and the global pools as reductions over the
// spatial dims) and Softmax / LogSoftmax on the GPU, over views of any strides.
//
// The input is seen as rows (the kept dims) of inner elements (the reduced dims). A row
// of at most kThreadRowMax elements is handled by one thread, so neighbouring threads
// take neighbouring rows (coalesced when a kept dim is innermost, as for softmax over
// the channels of a detector head); a longer row gets a block whose threads stride over
// it and combine their partial results through warp shuffles and shared memory.
//
// Accumulation follows the CPU kernels: f32 for f32/f16/bf16, f64 for f64, int64 for
// integers (and bool, read as 0/1). Max and Min propagate NaN; kPoolMax is max as MaxPool
// computes it: the first element, then only greater ones (NaN counts only when first).
// Softmax subtracts the row maximum (NaN ignored there, as std::max does) before exp.
#include <cuda/std/limits>

#include "hal/axis_rows.h"
#include "hal/cuda/dependent_launch.cuh"
#include "hal/cuda/launch.h"

namespace strider::cuda {
namespace {

using namespace device;

// Rows longer than this get a block of threads each, unless there are so many rows that
// threads alone fill the GPU: MobileNetV2's global pool at batch 32 (40960 rows of 49)
// took 0.061 ms with a block a row on an H100, one block's 64 threads sharing 49 loads.
constexpr int64_t kThreadRowMax = 32;
constexpr int64_t kManyRows = 16384, kManyRowsThreadRowMax = 256;

template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double,
                               std::conditional_t<std::is_integral_v<T>, int64_t, float>>;

template <typename A>
__device__ __forceinline__ bool is_nan(A x) {
  if constexpr (std::is_integral_v<A>) return false;
  else return x != x;
}

// The reduction's arithmetic (ops/reduce_math.h, shared with the CPU); kPoolMax and the
// softmax kinds are this file's own.
__device__ __forceinline__ ReduceMath math_of(ReduceKind kind) {
  switch (kind) {
    case ReduceKind::kMean: return ReduceMath::kMean;
    case ReduceKind::kMax: return ReduceMath::kMax;
    case ReduceKind::kMin: return ReduceMath::kMin;
    case ReduceKind::kProd: return ReduceMath::kProd;
    case ReduceKind::kL1: return ReduceMath::kL1;
    case ReduceKind::kL2: return ReduceMath::kL2;
    case ReduceKind::kSumSquare: return ReduceMath::kSumSquare;
    case ReduceKind::kLogSum: return ReduceMath::kLogSum;
    case ReduceKind::kLogSumExp: return ReduceMath::kLogSumExp;
    default: return ReduceMath::kSum;
  }
}

template <typename A>
__device__ __forceinline__ A initial(ReduceKind kind) {
  using L = ::cuda::std::numeric_limits<A>;
  switch (kind) {
    // -inf / +inf for floats: a row of -inf reduces to -inf (as ONNX and the reference say).
    case ReduceKind::kMax:
    case ReduceKind::kPoolMax: return L::has_infinity ? -L::infinity() : L::lowest();
    case ReduceKind::kMin: return L::has_infinity ? L::infinity() : L::max();
    case ReduceKind::kProd: return A(1);
    default: return A(0);
  }
}

// One more (mapped) element into a running result, in element order (`first`: no element yet).
template <typename A>
__device__ __forceinline__ A step(ReduceKind kind, A acc, A x, bool first) {
  if (kind == ReduceKind::kPoolMax) return (first || x > acc) ? x : acc;
  return reduce_combine(math_of(kind), acc, x);
}

// Two partial results, `a` holding elements before `b`'s. kMax and kMin are NaN-sticky
// from either side; kPoolMax keeps a NaN only in `a`, which in the reductions below is
// always the partial that holds the row's first element.
template <typename A>
__device__ __forceinline__ A merge(ReduceKind kind, A a, A b) {
  if (kind == ReduceKind::kPoolMax) return b > a ? b : a;
  return reduce_combine(math_of(kind), a, b);
}

template <typename T, typename A>
__device__ __forceinline__ void finish(const ReduceLaunch& a, int64_t out_offset, A acc, A row_max) {
  store<T>(a.out, out_offset, Compute<T>(reduce_finish(math_of(a.kind), acc, a.inner.count, row_max)));
}

template <typename T>
__global__ void __launch_bounds__(kThreads) reduce_rows_kernel(const ReduceLaunch a) {
  device::order_after_producers();
  using A = Acc<T>;
  const ReduceMath math = math_of(a.kind);
  for (int64_t r = global_thread(); r < a.rows.count; r += grid_threads()) {
    int64_t row[2], off[1];
    strided_offsets(a.rows, a.rows_div, r, row);
    A row_max = 0;
    if (reduce_needs_max(math)) {
      row_max = initial<A>(ReduceKind::kMax);
      for (int64_t j = 0; j < a.inner.count; ++j) {
        strided_offsets(a.inner, a.inner_div, j, off);
        row_max = reduce_combine(ReduceMath::kMax, row_max, A(load<T>(a.in, row[0] + off[0])));
      }
    }
    A acc = initial<A>(a.kind);
    for (int64_t j = 0; j < a.inner.count; ++j) {
      strided_offsets(a.inner, a.inner_div, j, off);
      acc = step(a.kind, acc, reduce_map(math, A(load<T>(a.in, row[0] + off[0])), row_max), j == 0);
    }
    finish<T>(a, row[1], acc, row_max);
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) reduce_block_kernel(const ReduceLaunch a) {
  device::order_after_producers();
  using A = Acc<T>;
  const ReduceKind kind = a.kind;
  const ReduceMath math = math_of(kind);
  for (int64_t r = blockIdx.x; r < a.rows.count; r += gridDim.x) {
    int64_t row[2], off[1];
    strided_offsets(a.rows, a.rows_div, r, row);
    A row_max = 0;
    if (reduce_needs_max(math)) {
      __shared__ A shared_max;
      row_max = initial<A>(ReduceKind::kMax);
      for (int64_t j = threadIdx.x; j < a.inner.count; j += blockDim.x) {
        strided_offsets(a.inner, a.inner_div, j, off);
        row_max = reduce_combine(ReduceMath::kMax, row_max, A(load<T>(a.in, row[0] + off[0])));
      }
      row_max = block_combine(row_max, initial<A>(ReduceKind::kMax),
                              [](A x, A y) { return reduce_combine(ReduceMath::kMax, x, y); });
      if (threadIdx.x == 0) shared_max = row_max;
      __syncthreads();
      row_max = shared_max;
      __syncthreads();  // shared_max is rewritten for the next row
    }
    A acc = initial<A>(kind);
    for (int64_t j = threadIdx.x; j < a.inner.count; j += blockDim.x) {
      strided_offsets(a.inner, a.inner_div, j, off);
      acc = step(kind, acc, reduce_map(math, A(load<T>(a.in, row[0] + off[0])), row_max), j == threadIdx.x);
    }
    acc = block_combine(acc, initial<A>(kind), [kind](A x, A y) { return merge(kind, x, y); });
    if (threadIdx.x == 0) finish<T>(a, row[1], acc, row_max);
  }
}

template <typename A> __device__ __forceinline__ A m_exp(A x) { return exp(x); }
template <> __device__ __forceinline__ float m_exp(float x) { return expf(x); }
template <typename A> __device__ __forceinline__ A m_log(A x) { return log(x); }
template <> __device__ __forceinline__ float m_log(float x) { return logf(x); }
// std::max(max, v): a NaN element never becomes the maximum.
template <typename A> __device__ __forceinline__ A max_of(A m, A v) { return m < v ? v : m; }

template <typename T>
__device__ __forceinline__ void softmax_write(const ReduceLaunch& a, const int64_t (&row)[2], int64_t j, Acc<T> max,
                                              Acc<T> sum, Acc<T> log_sum) {
  int64_t off[2];
  strided_offsets(a.inner, a.inner_div, j, off);
  Acc<T> v = Acc<T>(load<T>(a.in, row[0] + off[0])) - max;
  Acc<T> result = a.kind == ReduceKind::kLogSoftmax ? v - log_sum : m_exp(v) / sum;
  store<T>(a.out, row[1] + off[1], Compute<T>(result));
}

template <typename T>
__global__ void __launch_bounds__(kThreads) softmax_rows_kernel(const ReduceLaunch a) {
  device::order_after_producers();
  using A = Acc<T>;
  for (int64_t r = global_thread(); r < a.rows.count; r += grid_threads()) {
    int64_t row[2];
    strided_offsets(a.rows, a.rows_div, r, row);
    A max = -::cuda::std::numeric_limits<A>::infinity(), sum = 0;
    int64_t off[2];
    for (int64_t j = 0; j < a.inner.count; ++j) {
      strided_offsets(a.inner, a.inner_div, j, off);
      max = max_of(max, A(load<T>(a.in, row[0] + off[0])));
    }
    for (int64_t j = 0; j < a.inner.count; ++j) {
      strided_offsets(a.inner, a.inner_div, j, off);
      sum += m_exp(A(load<T>(a.in, row[0] + off[0])) - max);
    }
    const A log_sum = m_log(sum);
    for (int64_t j = 0; j < a.inner.count; ++j) softmax_write<T>(a, row, j, max, sum, log_sum);
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) softmax_block_kernel(const ReduceLaunch a) {
  device::order_after_producers();
  using A = Acc<T>;
  const A lowest = -::cuda::std::numeric_limits<A>::infinity();
  for (int64_t r = blockIdx.x; r < a.rows.count; r += gridDim.x) {
    int64_t row[2], off[2];
    strided_offsets(a.rows, a.rows_div, r, row);
    A max = lowest, sum = 0;
    for (int64_t j = threadIdx.x; j < a.inner.count; j += blockDim.x) {
      strided_offsets(a.inner, a.inner_div, j, off);
      max = max_of(max, A(load<T>(a.in, row[0] + off[0])));
    }
    max = block_combine(max, lowest, [](A x, A y) { return max_of(x, y); });
    __shared__ A shared_max, shared_sum;
    if (threadIdx.x == 0) shared_max = max;
    __syncthreads();
    max = shared_max;
    for (int64_t j = threadIdx.x; j < a.inner.count; j += blockDim.x) {
      strided_offsets(a.inner, a.inner_div, j, off);
      sum += m_exp(A(load<T>(a.in, row[0] + off[0])) - max);
    }
    sum = block_combine(sum, A(0), [](A x, A y) { return x + y; });
    if (threadIdx.x == 0) shared_sum = sum;
    __syncthreads();
    sum = shared_sum;
    const A log_sum = m_log(sum);
    for (int64_t j = threadIdx.x; j < a.inner.count; j += blockDim.x) softmax_write<T>(a, row, j, max, sum, log_sum);
    __syncthreads();  // shared_max and shared_sum are rewritten for the next row
  }
}

bool is_softmax(ReduceKind kind) { return kind == ReduceKind::kSoftmax || kind == ReduceKind::kLogSoftmax; }

template <typename T>
cudaError_t launch_reduce(const ReduceLaunch& l, cudaStream_t stream) {
  const bool softmax = is_softmax(l.kind);
  if (l.block_threads == 0) {
    unsigned grid = grid_for(l.rows.count, kThreads);
    if (softmax) launch_dependent(softmax_rows_kernel<T>, grid, kThreads, 0, stream, l);
    else launch_dependent(reduce_rows_kernel<T>, grid, kThreads, 0, stream, l);
  } else {
    unsigned grid = unsigned(std::min<int64_t>(l.rows.count, 1 << 20));
    if (softmax) launch_dependent(softmax_block_kernel<T>, grid, l.block_threads, 0, stream, l);
    else launch_dependent(reduce_block_kernel<T>, grid, l.block_threads, 0, stream, l);
  }
  return cudaGetLastError();
}

// fn.template operator()<T>() with T the device storage type of a numeric (not bool) dtype.
template <typename Fn>
void dispatch_numeric(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kF32: fn.template operator()<float>(); break;
    case DType::kF16: fn.template operator()<__half>(); break;
    case DType::kBF16: fn.template operator()<__nv_bfloat16>(); break;
    case DType::kF64: fn.template operator()<double>(); break;
    case DType::kI64: fn.template operator()<int64_t>(); break;
    case DType::kI32: fn.template operator()<int32_t>(); break;
    case DType::kI8: fn.template operator()<int8_t>(); break;
    case DType::kU8:
    case DType::kBool: fn.template operator()<uint8_t>(); break;  // bool: 0/1 bytes
  }
}

Status select_launcher(const ReduceSpec& s, ReduceLaunch* l) {
  const bool floating = is_floating(s.in.dtype);
  if (is_softmax(s.kind) && !floating) return unsupported("no CUDA softmax for " + std::string(dtype_name(s.in.dtype)));
  dispatch_numeric(s.in.dtype, [&]<typename T>() { l->launcher = &launch_reduce<T>; });
  return Status::ok();
}

template <typename T>
__global__ void __launch_bounds__(kThreads) arg_reduce_kernel(const ArgReduceLaunch a) {
  device::order_after_producers();
  using A = Acc<T>;
  for (int64_t r = global_thread(); r < a.rows.count; r += grid_threads()) {
    int64_t row[2];
    strided_offsets(a.rows, a.rows_div, r, row);
    A best = A(load<T>(a.in, row[0]));
    int64_t at = 0;
    for (int64_t j = 1; j < a.n; ++j) {
      const A x = A(load<T>(a.in, row[0] + j * a.step));
      if (arg_reduce_takes(a.max, a.last, x, best)) {
        best = x;
        at = j;
      }
    }
    a.out[row[1]] = at;
  }
}

template <typename T>
cudaError_t launch_arg_reduce(const ArgReduceLaunch& l, cudaStream_t stream) {
  launch_dependent(arg_reduce_kernel<T>, grid_for(l.rows.count, kThreads), kThreads, 0, stream, l);
  return cudaGetLastError();
}

template <typename T>
__global__ void __launch_bounds__(kThreads) cumsum_kernel(const CumSumLaunch a) {
  device::order_after_producers();
  using A = Acc<T>;
  for (int64_t r = global_thread(); r < a.rows.count; r += grid_threads()) {
    int64_t row[2];
    strided_offsets(a.rows, a.rows_div, r, row);
    A acc = A(a.product ? 1 : 0);
    for (int64_t t = 0; t < a.n; ++t) {
      const int64_t j = a.reverse ? a.n - 1 - t : t;
      const A x = A(load<T>(a.in, row[0] + j * a.in_step));
      const A next = a.product ? wrapping_mul(acc, x) : wrapping_add(acc, x);
      store<T>(a.out, row[1] + j * a.out_step, Compute<T>(a.exclusive ? acc : next));
      acc = next;
    }
  }
}

template <typename T>
cudaError_t launch_cumsum(const CumSumLaunch& l, cudaStream_t stream) {
  launch_dependent(cumsum_kernel<T>, grid_for(l.rows.count, kThreads), kThreads, 0, stream, l);
  return cudaGetLastError();
}

template <typename T>
__global__ void __launch_bounds__(kThreads) topk_kernel(const TopKLaunch l) {
  device::order_after_producers();
  for (int64_t t = global_thread(); t < l.rows.count * l.n; t += grid_threads()) {
    const int64_t r = t / l.n, i = t % l.n;
    int64_t row[3];
    l.rows.offsets(r, row);
    const auto x = load<T>(l.in, row[0] + i * l.in_step);
    int64_t rank = 0;
    for (int64_t j = 0; j < l.n && rank < l.k; ++j)
      rank += topk_before(l.largest, load<T>(l.in, row[0] + j * l.in_step), j, x, i) ? 1 : 0;
    if (rank >= l.k) continue;
    static_cast<Bits<T>*>(l.values)[row[1] + rank * l.values_step] = static_cast<const Bits<T>*>(l.in)[row[0] + i * l.in_step];
    l.indices[row[2] + rank * l.indices_step] = i;
  }
}

template <typename T>
cudaError_t launch_topk(const TopKLaunch& l, cudaStream_t stream) {
  launch_dependent(topk_kernel<T>, grid_for(l.rows.count * l.n, kThreads), kThreads, 0, stream, l);
  return cudaGetLastError();
}

}  // namespace

Status prepare_topk(const TensorView& in, const TensorView& values, const TensorView& indices, int64_t axis, int64_t k,
                    bool largest, TopKLaunch* l) {
  *l = TopKLaunch{};
  AxisRows rows = axis_rows(axis, {&in, &values, &indices});
  STRIDER_RETURN_IF_ERROR(make_indexer<3>(rows.sizes, rows.strides, &l->rows));
  l->n = in.sizes[size_t(axis)];
  l->k = k;
  l->in_step = in.strides[size_t(axis)];
  l->values_step = values.strides[size_t(axis)];
  l->indices_step = indices.strides[size_t(axis)];
  l->largest = largest;
  l->in = device_data<const std::byte>(in);
  l->values = device_data<std::byte>(values);
  l->indices = device_data<int64_t>(indices);
  if (in.dtype == DType::kBool) return unsupported("TopK on bool");
  dispatch_numeric(in.dtype, [&]<typename T>() { l->launcher = &launch_topk<T>; });
  return Status::ok();
}

Status run_topk(const TopKLaunch& l, cudaStream_t stream) {
  if (l.rows.count == 0 || l.n == 0 || l.k == 0) return Status::ok();
  cudaError_t error = l.launcher(l, stream);
  if (error == cudaSuccess) return Status::ok();
  return device_error(std::string("TopK kernel launch failed: ") + cudaGetErrorString(error));
}

Status prepare_cumsum(const TensorView& in, const TensorView& out, int64_t axis, bool exclusive, bool reverse, bool product,
                      CumSumLaunch* l) {
  *l = CumSumLaunch{};
  AxisRows rows = axis_rows(axis, {&in, &out});
  STRIDER_RETURN_IF_ERROR(make_indexer<2>(rows.sizes, rows.strides, &l->rows));
  make_fast_divisors(l->rows, l->rows_div);
  l->n = in.sizes[size_t(axis)];
  l->in_step = in.strides[size_t(axis)];
  l->out_step = out.strides[size_t(axis)];
  l->exclusive = exclusive;
  l->reverse = reverse;
  l->product = product;
  l->in = device_data<const std::byte>(in);
  l->out = device_data<std::byte>(out);
  if (in.dtype == DType::kBool) return unsupported(product ? "CumProd on bool" : "CumSum on bool");
  dispatch_numeric(in.dtype, [&]<typename T>() { l->launcher = &launch_cumsum<T>; });
  return Status::ok();
}

Status run_cumsum(const CumSumLaunch& l, cudaStream_t stream) {
  if (l.rows.count == 0 || l.n == 0) return Status::ok();
  cudaError_t error = l.launcher(l, stream);
  if (error == cudaSuccess) return Status::ok();
  return device_error(std::string("CumSum kernel launch failed: ") + cudaGetErrorString(error));
}

Status prepare_arg_reduce(const TensorView& in, const TensorView& out, int64_t axis, bool max, bool last,
                          ArgReduceLaunch* l) {
  *l = ArgReduceLaunch{};
  AxisRows rows = axis_rows(axis, {&in, &out});
  STRIDER_RETURN_IF_ERROR(make_indexer<2>(rows.sizes, rows.strides, &l->rows));
  make_fast_divisors(l->rows, l->rows_div);
  l->n = in.sizes[size_t(axis)];
  l->step = in.strides[size_t(axis)];
  l->max = max;
  l->last = last;
  l->in = device_data<const std::byte>(in);
  l->out = device_data<int64_t>(out);
  if (in.dtype == DType::kBool) return unsupported("ArgMax/ArgMin on bool");
  dispatch_numeric(in.dtype, [&]<typename T>() { l->launcher = &launch_arg_reduce<T>; });
  return Status::ok();
}

Status run_arg_reduce(const ArgReduceLaunch& l, cudaStream_t stream) {
  if (l.rows.count == 0) return Status::ok();
  cudaError_t error = l.launcher(l, stream);
  if (error == cudaSuccess) return Status::ok();
  return device_error(std::string("ArgMax/ArgMin kernel launch failed: ") + cudaGetErrorString(error));
}

Status prepare_reduce(const ReduceSpec& s, ReduceLaunch* l) {
  if (s.in.dtype != s.out.dtype) return internal_error("reduction from " + s.in.to_string() + " to " + s.out.to_string());
  *l = ReduceLaunch{};
  l->kind = s.kind;
  // Rows and inner elements are numbered in the input's memory order; MaxPool's maximum
  // keeps the row-major order of its elements (a NaN counts only as the first element).
  Shape row_sizes = s.row_sizes, inner_sizes = s.inner_sizes;
  std::vector<Strides> row_strides{s.in_row_strides, s.out_row_strides};
  std::vector<Strides> inner_strides{s.in_inner_strides,
                                     is_softmax(s.kind) ? s.out_inner_strides : Strides(s.inner_sizes.size(), 0)};
  order_dims_by(s.in_row_strides, row_sizes, row_strides);
  if (s.kind != ReduceKind::kPoolMax) order_dims_by(s.in_inner_strides, inner_sizes, inner_strides);
  STRIDER_RETURN_IF_ERROR(make_indexer<2>(row_sizes, row_strides, &l->rows));
  STRIDER_RETURN_IF_ERROR(make_indexer<2>(inner_sizes, inner_strides, &l->inner));
  make_fast_divisors(l->rows, l->rows_div);
  make_fast_divisors(l->inner, l->inner_div);
  l->in = device_data<const std::byte>(s.in);
  l->out = device_data<std::byte>(s.out);
  // (Not softmax: it reads a row three times, and its rows are usually contiguous.)
  const bool many_rows = !is_softmax(s.kind) && l->rows.count >= kManyRows && l->inner.count <= kManyRowsThreadRowMax;
  if (l->inner.count > kThreadRowMax && !many_rows) {
    int threads = 32;
    while (threads < kThreads && threads < l->inner.count) threads *= 2;
    l->block_threads = threads;
  }
  return select_launcher(s, l);
}

Status run_reduce(const ReduceLaunch& l, cudaStream_t stream) {
  if (l.rows.count == 0) return Status::ok();
  cudaError_t error = l.launcher(l, stream);
  if (error == cudaSuccess) return Status::ok();
  return device_error(std::string("reduction kernel launch failed: ") + cudaGetErrorString(error));
}

}  // namespace strider::cuda
