// The strided copy kernel behind every data-movement op and every upload or download of
// a non-dense view.
#include "hal/cuda/copy.h"
#include "hal/cuda/indexer.h"
#include "hal/cuda/launch.h"

namespace strider::cuda {
namespace {


// The strided copy's index space as kernel parameters: sizes as multiply-high divisors
// (below 2^31 words) and both views' strides in words, outermost first.
struct CopyIndex {
  int32_t rank = 0;
  FastDivisor sizes[kMaxDims];
  int64_t dst[kMaxDims] = {}, src[kMaxDims] = {};
};

template <typename Word>
__global__ void copy_kernel(CopyIndex a, uint32_t count, Word* dst, const Word* src) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) {
    uint32_t rest = i;
    int64_t d = 0, s = 0;
    for (int k = a.rank - 1; k > 0; --k) {
      const uint32_t q = device::fast_divide(rest, a.sizes[k]), index = rest - q * a.sizes[k].divisor;
      d += int64_t(index) * a.dst[k], s += int64_t(index) * a.src[k];
      rest = q;
    }
    dst[d + int64_t(rest) * a.dst[0]] = src[s + int64_t(rest) * a.src[0]];
  }
}

// Beyond 2^31 words: 64-bit division.
template <typename Word>
__global__ void copy_kernel_wide(StridedIndexer<2> ix, Word* dst, const Word* src) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < ix.count; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t offset[2];
    ix.offsets(i, offset);
    dst[offset[0]] = src[offset[1]];
  }
}

template <typename Word>
void launch_strided(const CopyLaunch& l, cudaStream_t stream) {
  Word* dst = static_cast<Word*>(l.dst);
  const Word* src = static_cast<const Word*>(l.src);
  if (l.count < int64_t(INT32_MAX)) {
    CopyIndex a;
    a.rank = l.rank;
    for (int d = 0; d < l.rank; ++d) a.sizes[d] = make_fast_divisor(l.sizes[d]), a.dst[d] = l.dst_strides[d], a.src[d] = l.src_strides[d];
    copy_kernel<Word><<<grid_for(l.count), 256, 0, stream>>>(a, uint32_t(l.count), dst, src);
    return;
  }
  StridedIndexer<2> ix;
  ix.rank = l.rank, ix.count = l.count;
  for (int d = 0; d < l.rank; ++d) ix.sizes[d] = l.sizes[d], ix.strides[0][d] = l.dst_strides[d], ix.strides[1][d] = l.src_strides[d];
  copy_kernel_wide<Word><<<grid_for(l.count), 256, 0, stream>>>(ix, dst, src);
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

Status prepare_copy(const TensorView& dst, const TensorView& src, CopyLaunch* l) {
  if (dst.sizes != src.sizes || dst.dtype != src.dtype)
    return internal_error("copy " + dst.to_string() + " <- " + src.to_string());
  *l = CopyLaunch{};
  const int64_t element_bytes = dtype_size(dst.dtype);
  if (dst.num_elements() == 0) return Status::ok();
  l->dst = device_data<std::byte>(dst);
  l->src = device_data<const std::byte>(src);
  if (dst.is_contiguous() && src.is_contiguous()) {
    l->path = CopyLaunch::Path::kMemcpy;
    l->bytes = dst.num_elements() * element_bytes;
    return Status::ok();
  }
  Shape sizes = dst.sizes;
  std::vector<Strides> strides = {dst.strides, src.strides};
  order_dims_by(dst.strides, sizes, strides);
  CollapsedDims c = collapse_dims(std::span<const int64_t>(sizes.data(), sizes.size()), strides);
  if (c.sizes.empty()) c.sizes = {1}, c.strides = {{1}, {1}};
  if (c.sizes.size() > size_t(kMaxDims))
    return unsupported(std::to_string(c.sizes.size()) + " dims after collapsing; the copy takes at most " + std::to_string(kMaxDims));
  if (element_bytes != 1 && element_bytes != 2 && element_bytes != 4 && element_bytes != 8 && element_bytes != 16)
    return unsupported("copy of " + std::to_string(element_bytes) + "-byte elements");
  // The widest word that tiles the innermost run of both views and every stride and address.
  const size_t inner = c.sizes.size() - 1;
  int64_t word = element_bytes;
  if (c.strides[0][inner] == 1 && c.strides[1][inner] == 1) {
    for (int64_t w : {16, 8, 4, 2}) {
      if (w <= element_bytes || (c.sizes[inner] * element_bytes) % w != 0) continue;
      bool fits = reinterpret_cast<uintptr_t>(l->dst) % w == 0 && reinterpret_cast<uintptr_t>(l->src) % w == 0;
      for (size_t d = 0; fits && d < inner; ++d)
        fits = (c.strides[0][d] * element_bytes) % w == 0 && (c.strides[1][d] * element_bytes) % w == 0;
      if (fits) {
        word = w;
        break;
      }
    }
  }
  const int64_t per_word = word / element_bytes;  // elements a word holds (1 unless widened)
  l->path = CopyLaunch::Path::kStrided;
  l->word_bytes = int32_t(word);
  l->rank = int32_t(c.sizes.size());
  l->count = 1;
  for (size_t d = 0; d < c.sizes.size(); ++d) {
    const bool widened = d == inner && per_word > 1;
    l->sizes[d] = widened ? c.sizes[d] / per_word : c.sizes[d];
    l->dst_strides[d] = widened ? 1 : c.strides[0][d] / (d == inner ? 1 : per_word);
    l->src_strides[d] = widened ? 1 : c.strides[1][d] / (d == inner ? 1 : per_word);
    l->count *= l->sizes[d];
  }
  return Status::ok();
}

Status run_copy(const CopyLaunch& l, cudaStream_t stream) {
  if (l.path == CopyLaunch::Path::kNone) return Status::ok();
  if (l.path == CopyLaunch::Path::kMemcpy) {
    cudaError_t error = cudaMemcpyAsync(l.dst, l.src, size_t(l.bytes), cudaMemcpyDeviceToDevice, stream);
    return error == cudaSuccess ? Status::ok() : device_error(std::string("copy: ") + cudaGetErrorString(error));
  }
  switch (l.word_bytes) {
    case 1: launch_strided<uint8_t>(l, stream); break;
    case 2: launch_strided<uint16_t>(l, stream); break;
    case 4: launch_strided<uint32_t>(l, stream); break;
    case 8: launch_strided<uint64_t>(l, stream); break;
    case 16: launch_strided<uint4>(l, stream); break;
    default: return internal_error("copy of " + std::to_string(l.word_bytes) + "-byte words");
  }
  return launch_status("copy");
}

Status launch_copy(const TensorView& dst, const TensorView& src, cudaStream_t stream) {
  CopyLaunch launch;
  STRIDER_RETURN_IF_ERROR(prepare_copy(dst, src, &launch));
  return run_copy(launch, stream);
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
