// How strider's own kernels are launched: as programmatic dependent launches (Hopper's
// PDL), so that a kernel's blocks are scheduled while the kernel before it in its stream
// is still finishing, instead of after the stream has seen it complete.
//
// Why: at batch 1 a plan is a chain of 30-60 small kernels, and between two dependent
// kernels the GPU spends 1-2 us draining the first, flushing its writes and launching the
// second; the kernels themselves often run 2-5 us. With the launch attribute
// cudaLaunchAttributeProgrammaticStreamSerialization, the next kernel's launch may begin
// as the blocks of the one before exit, before the stream has seen that kernel complete,
// and it then waits on the device, in `griddepcontrol.wait`, for that kernel's completion
// and the visibility of its writes.
//
// The contract that keeps this exact (docs/ARCHITECTURE.md, "Dependent launches"):
//  - Every __global__ function in src/hal/cuda begins with order_after_producers(): it
//    waits until every kernel this one depends on has completed and its writes are
//    visible, before any thread touches global memory (reads as well as writes: a write
//    before it could land under a producer still reading). The ctest
//    `cuda_kernels_order_after_producers` checks that every kernel's body begins so.
//  - A kernel launched with the attribute is complete only after that wait returned, so
//    the order is transitive along a stream: a kernel two steps later, or a copy, an
//    event record or a library kernel (cuBLASLt, cuDNN: launched normally) after it, sees
//    every earlier write, as in plain stream order.
//  - Cross-queue dependencies (events) and host synchronization are unchanged.
// STRIDER_CUDA_DEPENDENT_LAUNCH=0 launches every kernel in plain stream order (the
// instructions are then no-ops): the A/B switch, and the way out if a driver refuses.
#pragma once

#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>
#include <utility>

namespace strider::cuda {

inline bool dependent_launch_enabled() {
  static const bool enabled = [] {
    const char* value = std::getenv("STRIDER_CUDA_DEPENDENT_LAUNCH");
    return value == nullptr || std::strcmp(value, "0") != 0;
  }();
  return enabled;
}

// kernel<<<grid, block, shared, stream>>>(args...) as a programmatic dependent launch,
// in thread-block clusters of `cluster` blocks when that is more than one. Only for
// kernels that begin with order_after_producers().
template <typename... Params, typename... Args>
cudaError_t launch_dependent_in_clusters(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared, dim3 cluster,
                                         cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attributes[2] = {};
  attributes[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attributes[0].val.programmaticStreamSerializationAllowed = dependent_launch_enabled() ? 1 : 0;
  attributes[1].id = cudaLaunchAttributeClusterDimension;
  attributes[1].val.clusterDim.x = cluster.x;
  attributes[1].val.clusterDim.y = cluster.y;
  attributes[1].val.clusterDim.z = cluster.z;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared;
  config.stream = stream;
  config.attrs = attributes;
  config.numAttrs = cluster.x * cluster.y * cluster.z > 1 ? 2 : 1;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

template <typename... Params, typename... Args>
cudaError_t launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared, cudaStream_t stream,
                             Args&&... args) {
  return launch_dependent_in_clusters(kernel, grid, block, shared, dim3(1, 1, 1), stream, std::forward<Args>(args)...);
}

}  // namespace strider::cuda

#if defined(__CUDACC__)
namespace strider::cuda::device {

// The first statement of every kernel of strider's own (see above): wait for the kernels
// this one depends on. No kernel calls `griddepcontrol.launch_dependents`: the next kernel
// may then launch as this one's blocks exit (the implicit trigger), which measured better
// than letting it launch at this kernel's start: with the early trigger the next kernel's
// waiting blocks sat beside this one's, and BERT, GPT-2 and Llama at batch 1 in f32 ran
// 4% slower than with no dependent launches at all (H100, session 31: BERT 0.2656 ms
// early, 0.2553 off, 0.2496 with the implicit trigger; MobileNetV2 b1 bf16 0.2246, 0.2392,
// 0.2190).
__device__ __forceinline__ void order_after_producers() {
  asm volatile("griddepcontrol.wait;" ::: "memory");  // PTX 7.8, sm_90: the only target built
}

}  // namespace strider::cuda::device
#endif  // __CUDACC__
