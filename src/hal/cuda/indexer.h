// Indexing shared by our CUDA kernels: a linear element index becomes an element offset
// per operand through the (collapsed) sizes and each operand's strides, so every kernel
// honours arbitrary strides, zero (broadcast) and negative ones included.
//
// This header is compiled by nvcc as well as the host compiler, so it includes nothing
// that nvcc's front end cannot parse (fmt, in particular: .cu files never include it; the
// kernel classes live in .cc files and call launch functions declared in launch.h).
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "memory/collapse.h"
#include "memory/tensor_view.h"
#include "strider/status.h"

namespace strider::cuda {

inline constexpr int kMaxDims = 8;

// Passed by value to kernels: rank, sizes and N operands' element strides.
template <int N>
struct StridedIndexer {
  int rank = 0;
  int64_t count = 1;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[N][kMaxDims] = {};

  // Element offsets of element `linear` (row-major over `sizes`) in each operand.
  __host__ __device__ __forceinline__ void offsets(int64_t linear, int64_t (&out)[N]) const {
    for (int k = 0; k < N; ++k) out[k] = 0;
    for (int d = rank - 1; d >= 0; --d) {
      int64_t size = sizes[d];
      int64_t index = linear % size;
      linear /= size;
      for (int k = 0; k < N; ++k) out[k] += index * strides[k][d];
    }
  }
};

// Builds the indexer after collapsing dims; UNSUPPORTED beyond kMaxDims collapsed dims.
// (An out-parameter rather than Result<>: nvcc's front end cannot build the variant.)
template <int N>
Status make_indexer(const Shape& sizes, const std::vector<Strides>& strides, StridedIndexer<N>* ix) {
  CollapsedDims c = collapse_dims(std::span<const int64_t>(sizes.data(), sizes.size()), strides);
  if (c.sizes.size() > size_t(kMaxDims))
    return unsupported(std::to_string(c.sizes.size()) + " dims after collapsing; CUDA kernels index at most " +
                       std::to_string(kMaxDims));
  *ix = StridedIndexer<N>{};
  ix->rank = int(c.sizes.size());
  ix->count = 1;
  for (int64_t size : sizes) ix->count *= size;
  for (int d = 0; d < ix->rank; ++d) {
    ix->sizes[d] = c.sizes[size_t(d)];
    for (int k = 0; k < N; ++k) ix->strides[k][d] = c.strides[size_t(k)][size_t(d)];
  }
  return Status::ok();
}

// The device address of a view's element [0, ..., 0].
template <typename T>
T* device_data(const TensorView& view) {
  return reinterpret_cast<T*>(view.allocation->address() + view.byte_offset);
}

// A grid for a grid-stride loop over `count` elements.
inline unsigned grid_for(int64_t count, int threads = 256) {
  int64_t blocks = (count + threads - 1) / threads;
  return unsigned(std::max<int64_t>(1, std::min<int64_t>(blocks, 65535 * 8)));
}

// Kernels that move elements as they are: fn.template operator()<Word>() with the unsigned
// type of `element_size` bytes (1, 2, 4; 8 for anything else).
template <typename Fn>
void dispatch_words(int64_t element_size, Fn&& fn) {
  switch (element_size) {
    case 1: fn.template operator()<uint8_t>(); break;
    case 2: fn.template operator()<uint16_t>(); break;
    case 4: fn.template operator()<uint32_t>(); break;
    default: fn.template operator()<uint64_t>(); break;
  }
}

inline Status launch_status(const char* what) {
  cudaError_t error = cudaGetLastError();
  if (error == cudaSuccess) return Status::ok();
  return device_error(std::string(what) + ": kernel launch failed: " + cudaGetErrorString(error));
}

}  // namespace strider::cuda
