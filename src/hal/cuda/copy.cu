// The strided copy kernel behind every data-movement op and every upload or download of
// a non-dense view.
#include "hal/cuda/copy.h"
#include "hal/cuda/indexer.h"

namespace strider::cuda {
namespace {


template <typename Word>
__global__ void copy_kernel(StridedIndexer<2> ix, Word* dst, const Word* src) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < ix.count; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t offset[2];
    ix.offsets(i, offset);
    dst[offset[0]] = src[offset[1]];
  }
}

template <typename Word>
void launch_words(const StridedIndexer<2>& ix, const TensorView& dst, const TensorView& src, cudaStream_t stream) {
  copy_kernel<Word><<<grid_for(ix.count), 256, 0, stream>>>(ix, device_data<Word>(dst), device_data<const Word>(src));
}

// Element i in row-major order of src's sizes to element i of dst's (a reshape between
// views whose strides admit no view of either in the other's sizes).
template <typename Word>
__global__ void reshape_copy_kernel(StridedIndexer<1> to, StridedIndexer<1> from, Word* dst, const Word* src) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < to.count; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t d[1], s[1];
    to.offsets(i, d);
    from.offsets(i, s);
    dst[d[0]] = src[s[0]];
  }
}

template <typename Word>
void launch_reshape_words(const StridedIndexer<1>& to, const StridedIndexer<1>& from, const TensorView& dst,
                          const TensorView& src, cudaStream_t stream) {
  reshape_copy_kernel<Word><<<grid_for(to.count), 256, 0, stream>>>(to, from, device_data<Word>(dst),
                                                                    device_data<const Word>(src));
}

}  // namespace

Status launch_reshape_copy(const TensorView& dst, const TensorView& src, cudaStream_t stream) {
  if (dst.num_elements() != src.num_elements() || dst.dtype != src.dtype)
    return internal_error("reshape copy " + dst.to_string() + " <- " + src.to_string());
  if (dst.num_elements() == 0) return Status::ok();
  StridedIndexer<1> to, from;
  STRIDER_RETURN_IF_ERROR(make_indexer<1>(dst.sizes, {dst.strides}, &to));
  STRIDER_RETURN_IF_ERROR(make_indexer<1>(src.sizes, {src.strides}, &from));
  dispatch_words(dtype_size(dst.dtype), [&]<typename Word>() { launch_reshape_words<Word>(to, from, dst, src, stream); });
  return launch_status("reshape copy");
}

Status launch_copy(const TensorView& dst, const TensorView& src, cudaStream_t stream) {
  if (dst.sizes != src.sizes || dst.dtype != src.dtype)
    return internal_error("copy " + dst.to_string() + " <- " + src.to_string());
  if (dst.num_elements() == 0) return Status::ok();
  int64_t bytes = dst.num_elements() * dtype_size(dst.dtype);
  if (dst.is_contiguous() && src.is_contiguous()) {
    cudaError_t error = cudaMemcpyAsync(device_data<std::byte>(dst), device_data<const std::byte>(src), size_t(bytes),
                                        cudaMemcpyDeviceToDevice, stream);
    return error == cudaSuccess ? Status::ok() : device_error(std::string("copy: ") + cudaGetErrorString(error));
  }
  StridedIndexer<2> ix;
  STRIDER_RETURN_IF_ERROR(make_indexer<2>(dst.sizes, {dst.strides, src.strides}, &ix));
  dispatch_words(dtype_size(dst.dtype), [&]<typename Word>() { launch_words<Word>(ix, dst, src, stream); });
  return launch_status("copy");
}

namespace {
__global__ void delay_kernel(long long nanoseconds) {
  const long long start = clock64();
  // clock64 counts cycles; 2 GHz is the H200's boost clock, so this waits at least as long
  // at any lower clock.
  while (clock64() - start < nanoseconds * 2) {
  }
}
}  // namespace

Status launch_delay(cudaStream_t stream, int microseconds) {
  delay_kernel<<<1, 1, 0, stream>>>(1000LL * microseconds);
  cudaError_t error = cudaGetLastError();
  return error == cudaSuccess ? Status::ok() : device_error(std::string("delay kernel: ") + cudaGetErrorString(error));
}

}  // namespace strider::cuda
