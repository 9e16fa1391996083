// What the kernels that run a tile of "columns" (pixels or time steps) a block share: the
// gated stack (gated_stack.h) and the WaveNet layer (wavenet_layer.h). A block runs
// `groups` column groups of C threads, each thread Q neighbouring columns (Q = 1, 2, 4 or
// 8, a template parameter so its accumulators stay in registers); Q and the storage dtype
// are chosen at run time, so each kernel is instantiated for every pair and picked here.
// nvcc only.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "hal/cuda/launch.h"
#include "strider/dtype.h"
#include "strider/status.h"

namespace strider::cuda {

// The most columns a thread may carry while a launch over `columns` still has a block for
// every one of `sms` multiprocessors and fits(q) holds (its shared memory fits): more
// columns share each weight read from shared memory, more blocks fill the GPU. 1 at least.
template <typename Fits>
int columns_per_thread(int64_t columns, int groups, int sms, Fits fits) {
  for (int q : {8, 4, 2}) {
    const int64_t per_block = int64_t(groups) * q;
    if ((columns + per_block - 1) / per_block >= sms && fits(q)) return q;
  }
  return 1;
}

// A kernel's instantiation: its launcher, and the call that lets it use `bytes` of dynamic
// shared memory (made once, where the kernel object is created, not in a graph capture).
template <typename Launcher>
struct ColumnKernel {
  Launcher launcher = nullptr;
  cudaError_t (*allow)(size_t bytes) = nullptr;
};

// Entry<T, Q> has static `launch` (a Launcher) and `allow`; the instantiation for dtype and
// q, after allowing it `shared` bytes. UNSUPPORTED for a dtype other than f32, bf16, f16.
template <template <typename, int> class Entry, typename Launcher>
Result<Launcher> column_kernel(DType dtype, int q, size_t shared, const char* what) {
  auto for_q = [q]<typename T>(T*) -> ColumnKernel<Launcher> {
    switch (q) {
      case 8: return {Entry<T, 8>::launch, Entry<T, 8>::allow};
      case 4: return {Entry<T, 4>::launch, Entry<T, 4>::allow};
      case 2: return {Entry<T, 2>::launch, Entry<T, 2>::allow};
      default: return {Entry<T, 1>::launch, Entry<T, 1>::allow};
    }
  };
  ColumnKernel<Launcher> chosen;
  switch (dtype) {
    case DType::kF32: chosen = for_q(static_cast<float*>(nullptr)); break;
    case DType::kBF16: chosen = for_q(static_cast<__nv_bfloat16*>(nullptr)); break;
    case DType::kF16: chosen = for_q(static_cast<__half*>(nullptr)); break;
    default: return unsupported(std::string(what) + ": no kernel for " + std::string(dtype_name(dtype)));
  }
  const cudaError_t error = chosen.allow(shared);
  if (error != cudaSuccess)
    return device_error(std::string(what) + ": shared memory of " + std::to_string(shared) + " bytes refused: " +
                        cudaGetErrorString(error));
  return chosen.launcher;
}

}  // namespace strider::cuda
