// Strided device copies, shared by the data-movement kernels and by the CUDA device's
// uploads and downloads of non-dense views.
#pragma once

#include <cuda_runtime.h>

#include "hal/cuda/indexer.h"
#include "memory/tensor_view.h"
#include "strider/status.h"

namespace strider::cuda {

// A copy of every element of `src` into the same position of `dst` (equal sizes and
// dtypes, any strides on either side, stride 0 in `src` broadcasts), prepared once: the
// dims are visited in dst's memory order (so a warp's stores are neighbours), collapsed,
// and where both views run contiguously along the innermost dim with every stride and
// both addresses aligned, moved as words of up to 16 bytes (a channel slice of bf16
// values copied two bytes a thread ran at 5% of the memory ceiling). Indices use 32-bit
// multiply-high division below 2^31 words. Element order does not matter: dst's elements
// are distinct. Both views must be device-addressable (their allocation's address is a
// device address) and stay where they are until the last run.
struct CopyLaunch {
  // kTranspose: dst runs contiguously along one dim (`inner`) and src along another
  // (`across`): 32x32 tiles through shared memory, so that both the loads and the stores of
  // a warp are neighbours (YOLOv8n's detect Concat of channels-last heads into
  // [N, 144, anchors] ran at 14% of the memory ceiling as a strided copy).
  enum class Path : uint8_t { kNone, kMemcpy, kStrided, kTranspose };
  Path path = Path::kNone;
  void* dst = nullptr;
  const void* src = nullptr;
  int64_t bytes = 0;       // kMemcpy
  int32_t word_bytes = 0;  // kStrided: 1, 2, 4, 8 or 16
  int32_t rank = 0;
  int64_t count = 0;       // words
  int64_t sizes[kMaxDims] = {}, dst_strides[kMaxDims] = {}, src_strides[kMaxDims] = {};  // in words, outermost first
  int32_t inner = -1, across = -1;  // kTranspose: the dims where dst and src have stride 1
};
Status prepare_copy(const TensorView& dst, const TensorView& src, CopyLaunch* launch);
Status run_copy(const CopyLaunch& launch, cudaStream_t stream);
// prepare_copy, then run_copy (for copies made once).
Status launch_copy(const TensorView& dst, const TensorView& src, cudaStream_t stream);
// Enqueues a copy of element i of `src` (row-major over its sizes) into element i of `dst`
// (row-major over its own sizes): equal element counts and dtypes, any strides. What a
// Reshape does when neither view can be seen in the other's sizes.
Status launch_reshape_copy(const TensorView& dst, const TensorView& src, cudaStream_t stream);

// Enqueues a one-thread kernel that keeps `stream` busy for about `microseconds` (for
// timing what follows it on the device alone: CudaQueue::time_device_only).
Status launch_delay(cudaStream_t stream, int microseconds);

}  // namespace strider::cuda
