// STRIDER_HOST_DEVICE marks a function that nvcc compiles for the host and the GPU alike
// (the scalar math in ops/elementwise_math.h, the window taps in ops/window_taps.h); the
// host compiler sees a plain inline function.
#pragma once

#if defined(__CUDACC__)
#define STRIDER_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define STRIDER_HOST_DEVICE inline
#endif
