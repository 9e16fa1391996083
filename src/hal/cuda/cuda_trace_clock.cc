// The CUDA device's trace clock (hal/trace_clock.h): a stamp is an event recorded on the
// command's stream, so it is when the GPU got there, not when the host enqueued. Host-queue
// commands (uploads, downloads: the host waits for them) have no stream: their stamps are
// events on the legacy default stream, which the GPU passes at once since strider's
// streams do not block on it, so they mark when the host got there on the GPU's clock.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>

#include "hal/cuda/cuda_device.h"
#include "hal/cuda/cuda_check.h"

namespace strider::cuda {
namespace {

class CudaTraceClock final : public TraceClock {
 public:
  explicit CudaTraceClock(int ordinal) : ordinal_(ordinal) {}
  ~CudaTraceClock() override {
    for (const auto& [id, event] : events_) cudaEventDestroy(event);
  }

  void stamp(const QueueContext& context, size_t id) override {
    cudaSetDevice(ordinal_);
    cudaEvent_t event = nullptr;
    if (cudaEventCreate(&event) != cudaSuccess) return;  // read() reports the stamp as missing
    cudaEventRecord(event, static_cast<cudaStream_t>(context.native_stream));
    std::lock_guard lock(mutex_);
    events_[id] = event;
  }

  Result<std::vector<double>> read(size_t count) override {
    cudaSetDevice(ordinal_);
    std::lock_guard lock(mutex_);
    std::vector<double> ms(count, std::numeric_limits<double>::quiet_NaN());
    if (events_.empty()) return ms;
    const cudaEvent_t base = events_.begin()->second;
    double earliest = 0;
    for (const auto& [id, event] : events_) {
      STRIDER_CUDA_RETURN(cudaEventSynchronize(event), "reading a trace stamp");
      float after_base = 0;
      STRIDER_CUDA_RETURN(cudaEventElapsedTime(&after_base, base, event), "reading a trace stamp");
      if (id < count) ms[id] = after_base;
      earliest = std::min(earliest, double(after_base));
    }
    for (double& v : ms) v -= earliest;  // NaN stays NaN
    return ms;
  }

 private:
  int ordinal_;
  std::mutex mutex_;
  std::map<size_t, cudaEvent_t> events_;
};

}  // namespace

std::unique_ptr<TraceClock> CudaDevice::make_trace_clock() { return std::make_unique<CudaTraceClock>(ordinal_); }

}  // namespace strider::cuda
