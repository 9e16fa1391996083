// Asynchronous copies from global into shared memory (cp.async, sm_80 and up), for
// kernels that stage constants (a layer's weights) while they do other work. nvcc only.
#pragma once

namespace strider::cuda::device {

// Asynchronous 16-byte copies from global into shared memory (cp.async, sm_80 and up):
// the copy runs while the thread goes on; copy_async_wait<N>() returns once at most N of
// this thread's committed groups are still in flight.
__device__ __forceinline__ void copy_async_16(void* shared_destination, const void* global_source) {
  const unsigned destination = static_cast<unsigned>(__cvta_generic_to_shared(shared_destination));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(destination), "l"(global_source) : "memory");
}
// The same, or 16 zero bytes where !valid (nothing is read from `global_source` then; it
// must still be an address).
__device__ __forceinline__ void copy_async_16_or_zero(void* shared_destination, const void* global_source, bool valid) {
  const unsigned destination = static_cast<unsigned>(__cvta_generic_to_shared(shared_destination));
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(destination), "l"(global_source), "r"(bytes) : "memory");
}
__device__ __forceinline__ void copy_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void copy_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

}  // namespace strider::cuda::device
