// Probe: how fast CudaDevice's PinnedStaging (hal/cuda/pinned_staging.h) moves pageable
// memory at the sizes a run's inputs and outputs have, against pinned memory's DMA alone
// (the floor run()'s ratio is measured against) and the driver's own pageable copies.
// Per size, GB/s (median of 15) of:
//   pin      cudaMemcpyAsync from / into pinned memory (the bus)
//   page     cudaMemcpyAsync from / into pageable memory (the driver stages it)
//   stg      PinnedStaging as the device makes it (parts sized per transfer)
//   stg1M    the same with 1-MiB parts (sessions 13-33)
//   stg256K  256-KiB parts
//   stg16t   16 threads instead of the default (half the cores, at most 8)
//   spin     idle threads polling 300 us before sleeping (STRIDER_CUDA_STAGING_SPIN_US=300)
//   fresh    stg's download into memory allocated for it (as run() returns a new tensor
//            each call: the allocator may hand back pages that fault on first touch)
// Run with no arguments on the GPU machine (scripts/gpu-check probes).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "hal/cuda/pinned_staging.h"

namespace {

using Clock = std::chrono::steady_clock;

double median_gbs(size_t bytes, const std::function<bool()>& once) {
  std::vector<double> seconds;
  for (int i = 0; i < 17; ++i) {
    const auto start = Clock::now();
    if (!once()) return 0;
    if (i >= 2) seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::sort(seconds.begin(), seconds.end());
  return double(bytes) / seconds[seconds.size() / 2] / 1e9;
}

bool ok(const strider::Status& s) {
  if (!s.is_ok()) std::printf("error: %s\n", s.to_string().c_str());
  return s.is_ok();
}

}  // namespace

int main() {
  using strider::cuda::PinnedStaging;
  cudaStream_t stream = nullptr;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
    std::printf("no GPU\n");
    return 1;
  }
  const size_t most = size_t(64) << 20;
  void* device = nullptr;
  void* pinned = nullptr;
  if (cudaMalloc(&device, most) != cudaSuccess || cudaHostAlloc(&pinned, most, cudaHostAllocDefault) != cudaSuccess) return 1;
  std::vector<std::byte> pageable(most, std::byte(7));
  PinnedStaging staged(0), staged_1m(0, 0, size_t(1) << 20), staged_256k(0, 0, size_t(256) << 10), staged_16t(0, 16),
      staged_spin(0, 0, 0, /*spin_us=*/300);
  const auto h2d = [&](const void* from, size_t n) {
    return cudaMemcpyAsync(device, from, n, cudaMemcpyHostToDevice, stream) == cudaSuccess &&
           cudaStreamSynchronize(stream) == cudaSuccess;
  };
  const auto d2h = [&](void* to, size_t n) {
    return cudaMemcpyAsync(to, device, n, cudaMemcpyDeviceToHost, stream) == cudaSuccess &&
           cudaStreamSynchronize(stream) == cudaSuccess;
  };
  std::printf("GB/s, median of 15; parts by default: %s\n", "about two a thread, 64 KiB to 1 MiB");
  std::printf("%8s %4s %7s %7s %7s %7s %7s %7s %7s %7s\n", "MiB", "dir", "pin", "page", "stg", "stg1M", "stg256K",
              "stg16t", "spin", "fresh");
  for (double mib : {0.03, 0.26, 1.0, 4.2, 16.8, 39.0, 64.0}) {
    const size_t n = std::min(most, size_t(mib * 1048576.0));
    const auto up = [&](PinnedStaging& s) { return [&] { return ok(s.upload(device, pageable.data(), n, stream)); }; };
    const auto down = [&](PinnedStaging& s) { return [&] { return ok(s.download(pageable.data(), device, n, stream)); }; };
    std::printf("%8.2f %4s %7.1f %7.1f %7.1f %7.1f %7.1f %7.1f %7.1f %7s\n", mib, "h2d",
                median_gbs(n, [&] { return h2d(pinned, n); }), median_gbs(n, [&] { return h2d(pageable.data(), n); }),
                median_gbs(n, up(staged)), median_gbs(n, up(staged_1m)), median_gbs(n, up(staged_256k)),
                median_gbs(n, up(staged_16t)), median_gbs(n, up(staged_spin)), "-");
    const double fresh = median_gbs(n, [&] {
      std::unique_ptr<std::byte[]> target(new std::byte[n]);  // not zeroed: as Tensor::for_overwrite
      return ok(staged.download(target.get(), device, n, stream));
    });
    std::printf("%8.2f %4s %7.1f %7.1f %7.1f %7.1f %7.1f %7.1f %7.1f %7.1f\n", mib, "d2h",
                median_gbs(n, [&] { return d2h(pinned, n); }), median_gbs(n, [&] { return d2h(pageable.data(), n); }),
                median_gbs(n, down(staged)), median_gbs(n, down(staged_1m)), median_gbs(n, down(staged_256k)),
                median_gbs(n, down(staged_16t)), median_gbs(n, down(staged_spin)), fresh);
  }
  return 0;
}
