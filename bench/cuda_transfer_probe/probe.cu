// Probe: host <-> device copy speed on this machine, for choosing how CudaDevice moves a
// run's inputs and outputs: pageable memory straight to cudaMemcpyAsync (the driver stages
// it), pinned memory (pure DMA), and pageable memory staged by us through two pinned
// chunks (memcpy of chunk i+1 overlapping the DMA of chunk i).
//   nvcc -O2 -arch=sm_90 -o probe probe.cu && ./probe
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { std::printf("%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)

using Clock = std::chrono::steady_clock;

template <typename F>
double best_gbs(size_t bytes, F&& f) {
  double best = 1e30;
  for (int i = 0; i < 7; ++i) {
    auto t0 = Clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return bytes / best / 1e9;
}

int main() {
  const size_t chunk = size_t(1) << 20;
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  void* pin[2];
  cudaEvent_t done[2];
  for (int i = 0; i < 2; ++i) {
    CHECK(cudaHostAlloc(&pin[i], chunk, cudaHostAllocDefault));
    CHECK(cudaEventCreateWithFlags(&done[i], cudaEventDisableTiming));
  }
  std::printf("%10s %9s %9s %9s %9s %9s %9s %9s\n", "MB", "h2d-page", "h2d-pin", "h2d-stg", "d2h-page", "d2h-pin",
              "d2h-stg", "memcpy");
  for (double mb : {0.1, 0.6, 3.2, 19.3, 64.0}) {
    const size_t bytes = size_t(mb * 1e6);
    std::vector<char> page(bytes, 1), back(bytes, 2);
    void *dev, *pinned;
    CHECK(cudaMalloc(&dev, bytes));
    CHECK(cudaHostAlloc(&pinned, bytes, cudaHostAllocDefault));
    std::memset(pinned, 3, bytes);
    double h2d_page = best_gbs(bytes, [&] { cudaMemcpyAsync(dev, page.data(), bytes, cudaMemcpyHostToDevice, s); cudaStreamSynchronize(s); });
    double h2d_pin = best_gbs(bytes, [&] { cudaMemcpyAsync(dev, pinned, bytes, cudaMemcpyHostToDevice, s); cudaStreamSynchronize(s); });
    double h2d_stg = best_gbs(bytes, [&] {
      for (size_t at = 0, k = 0; at < bytes; at += chunk, ++k) {
        const size_t n = std::min(chunk, bytes - at);
        cudaEventSynchronize(done[k % 2]);
        std::memcpy(pin[k % 2], page.data() + at, n);
        cudaMemcpyAsync(static_cast<char*>(dev) + at, pin[k % 2], n, cudaMemcpyHostToDevice, s);
        cudaEventRecord(done[k % 2], s);
      }
      cudaStreamSynchronize(s);
    });
    double d2h_page = best_gbs(bytes, [&] { cudaMemcpyAsync(back.data(), dev, bytes, cudaMemcpyDeviceToHost, s); cudaStreamSynchronize(s); });
    double d2h_pin = best_gbs(bytes, [&] { cudaMemcpyAsync(pinned, dev, bytes, cudaMemcpyDeviceToHost, s); cudaStreamSynchronize(s); });
    double d2h_stg = best_gbs(bytes, [&] {
      // DMA chunk k+1 while copying chunk k out of its pinned buffer.
      const size_t chunks = (bytes + chunk - 1) / chunk;
      auto issue = [&](size_t k) {
        const size_t at = k * chunk, n = std::min(chunk, bytes - at);
        cudaMemcpyAsync(pin[k % 2], static_cast<char*>(dev) + at, n, cudaMemcpyDeviceToHost, s);
        cudaEventRecord(done[k % 2], s);
      };
      issue(0);
      for (size_t k = 0; k < chunks; ++k) {
        if (k + 1 < chunks) issue(k + 1);
        cudaEventSynchronize(done[k % 2]);
        const size_t at = k * chunk, n = std::min(chunk, bytes - at);
        std::memcpy(back.data() + at, pin[k % 2], n);
      }
    });
    double host = best_gbs(bytes, [&] { std::memcpy(back.data(), page.data(), bytes); });
    std::printf("%10.1f %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f\n", mb, h2d_page, h2d_pin, h2d_stg, d2h_page, d2h_pin,
                d2h_stg, host);
    cudaFree(dev);
    cudaFreeHost(pinned);
  }
  std::printf("GB/s, best of 7\n");
  return 0;
}
