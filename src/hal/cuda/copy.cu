// The strided copy kernel behind every data-movement op and every upload or download of
// a non-dense view.
#include "hal/cuda/dependent_launch.cuh"
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
  device::order_after_producers();
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
  device::order_after_producers();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < ix.count; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t offset[2];
    ix.offsets(i, offset);
    dst[offset[0]] = src[offset[1]];
  }
}

// The transposing copy (CopyLaunch::Path::kTranspose): a block moves a 32x32 tile of the
// (across, inner) plane of one position of the other dims; loads run along `across`
// (src's unit stride), stores along `inner` (dst's), through a padded shared tile.
constexpr int kTile = 32, kTileRows = 8;
struct TransposeIndex {
  int32_t rest_rank = 0;  // the other dims, outermost first
  FastDivisor rest[kMaxDims];
  int64_t rest_dst[kMaxDims] = {}, rest_src[kMaxDims] = {};
  uint32_t batch = 1;     // positions of the other dims
  int32_t inner_size = 0, across_size = 0;
  int64_t inner_src = 0, across_dst = 0;  // the strides that are not 1
};

template <typename Word>
__global__ void __launch_bounds__(kTile * kTileRows) transpose_copy_kernel(TransposeIndex t, Word* dst, const Word* src) {
  device::order_after_producers();
  __shared__ Word tile[kTile][kTile + 1];
  const int inner0 = blockIdx.x * kTile, across0 = blockIdx.y * kTile;
  for (uint32_t b = blockIdx.z; b < t.batch; b += gridDim.z) {
    int64_t d = 0, s = 0;
    uint32_t rest = b;
    for (int k = t.rest_rank - 1; k >= 0; --k) {
      const uint32_t q = device::fast_divide(rest, t.rest[k]), index = rest - q * t.rest[k].divisor;
      d += int64_t(index) * t.rest_dst[k], s += int64_t(index) * t.rest_src[k];
      rest = q;
    }
    for (int k = threadIdx.y; k < kTile; k += kTileRows) {
      const int inner = inner0 + k, across = across0 + int(threadIdx.x);
      if (inner < t.inner_size && across < t.across_size) tile[k][threadIdx.x] = src[s + inner * t.inner_src + across];
    }
    __syncthreads();
    for (int k = threadIdx.y; k < kTile; k += kTileRows) {
      const int across = across0 + k, inner = inner0 + int(threadIdx.x);
      if (inner < t.inner_size && across < t.across_size) dst[d + across * t.across_dst + inner] = tile[threadIdx.x][k];
    }
    __syncthreads();  // the tile is refilled for the next position
  }
}

template <typename Word>
void launch_transpose(const CopyLaunch& l, cudaStream_t stream) {
  TransposeIndex t;
  for (int d = 0; d < l.rank; ++d) {
    if (d == l.inner || d == l.across) continue;
    t.rest[t.rest_rank] = make_fast_divisor(l.sizes[d]);
    t.rest_dst[t.rest_rank] = l.dst_strides[d], t.rest_src[t.rest_rank] = l.src_strides[d];
    t.batch *= uint32_t(l.sizes[d]);
    ++t.rest_rank;
  }
  t.inner_size = int32_t(l.sizes[l.inner]), t.across_size = int32_t(l.sizes[l.across]);
  t.inner_src = l.src_strides[l.inner], t.across_dst = l.dst_strides[l.across];
  const dim3 grid(unsigned((t.inner_size + kTile - 1) / kTile), unsigned((t.across_size + kTile - 1) / kTile),
                  unsigned(std::min<uint32_t>(t.batch, 65535)));
  launch_dependent(transpose_copy_kernel<Word>, grid, dim3(kTile, kTileRows), 0, stream,
                   t, static_cast<Word*>(l.dst), static_cast<const Word*>(l.src));
}

// The transposing path's condition on the collapsed dims (word = element): dst's innermost
// dim has unit stride in dst only, another has it in src only, both are at least a few
// tiles' worth, and the tile grid and the other positions fit the launch's 32-bit counts.
bool transpose_applies(CopyLaunch& l) {
  const int inner = l.rank - 1;
  if (l.rank < 2 || l.dst_strides[inner] != 1 || l.src_strides[inner] == 1) return false;
  int across = -1;
  for (int d = 0; d < inner; ++d)
    if (l.src_strides[d] == 1 && l.dst_strides[d] != 1) across = d;
  if (across < 0 || l.sizes[inner] < 8 || l.sizes[across] < 8) return false;
  int64_t batch = 1;
  for (int d = 0; d < l.rank; ++d)
    if (d != inner && d != across) batch *= l.sizes[d];
  const int64_t tiles_across = (l.sizes[across] + kTile - 1) / kTile;
  if (l.sizes[inner] >= int64_t(INT32_MAX) - kTile || tiles_across > 65535 || batch >= int64_t(INT32_MAX)) return false;
  l.inner = inner, l.across = across;
  return true;
}

template <typename Word>
void launch_strided(const CopyLaunch& l, cudaStream_t stream) {
  Word* dst = static_cast<Word*>(l.dst);
  const Word* src = static_cast<const Word*>(l.src);
  if (l.count < int64_t(INT32_MAX)) {
    CopyIndex a;
    a.rank = l.rank;
    for (int d = 0; d < l.rank; ++d) a.sizes[d] = make_fast_divisor(l.sizes[d]), a.dst[d] = l.dst_strides[d], a.src[d] = l.src_strides[d];
    launch_dependent(copy_kernel<Word>, grid_for(l.count), 256, 0, stream, a, uint32_t(l.count), dst, src);
    return;
  }
  StridedIndexer<2> ix;
  ix.rank = l.rank, ix.count = l.count;
  for (int d = 0; d < l.rank; ++d) ix.sizes[d] = l.sizes[d], ix.strides[0][d] = l.dst_strides[d], ix.strides[1][d] = l.src_strides[d];
  launch_dependent(copy_kernel_wide<Word>, grid_for(l.count), 256, 0, stream, ix, dst, src);
}

// Element i in row-major order of src's sizes to element i of dst's (a reshape between
// views whose strides admit no view of either in the other's sizes).
template <typename Word>
__global__ void reshape_copy_kernel(StridedIndexer<1> to, StridedIndexer<1> from, Word* dst, const Word* src) {
  device::order_after_producers();
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
  launch_dependent(reshape_copy_kernel<Word>, grid_for(to.count), 256, 0, stream,
                   to, from, device_data<Word>(dst), device_data<const Word>(src));
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
  if (word == element_bytes && transpose_applies(*l)) l->path = CopyLaunch::Path::kTranspose;
  return Status::ok();
}

Status run_copy(const CopyLaunch& l, cudaStream_t stream) {
  if (l.path == CopyLaunch::Path::kNone) return Status::ok();
  if (l.path == CopyLaunch::Path::kMemcpy) {
    cudaError_t error = cudaMemcpyAsync(l.dst, l.src, size_t(l.bytes), cudaMemcpyDeviceToDevice, stream);
    return error == cudaSuccess ? Status::ok() : device_error(std::string("copy: ") + cudaGetErrorString(error));
  }
  const bool transpose = l.path == CopyLaunch::Path::kTranspose;
  auto launch = [&]<typename Word>() { transpose ? launch_transpose<Word>(l, stream) : launch_strided<Word>(l, stream); };
  switch (l.word_bytes) {
    case 1: launch.template operator()<uint8_t>(); break;
    case 2: launch.template operator()<uint16_t>(); break;
    case 4: launch.template operator()<uint32_t>(); break;
    case 8: launch.template operator()<uint64_t>(); break;
    case 16: launch.template operator()<uint4>(); break;
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
  device::order_after_producers();
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
