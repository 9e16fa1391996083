#include "hal/trace_clock.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>

namespace strider {
namespace {

class HostTraceClock final : public TraceClock {
 public:
  void stamp(const QueueContext&, size_t id) override {
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard lock(mutex_);
    stamps_[id] = now;
  }

  Result<std::vector<double>> read(size_t count) override {
    std::lock_guard lock(mutex_);
    std::vector<double> ms(count, std::numeric_limits<double>::quiet_NaN());
    if (stamps_.empty()) return ms;
    auto earliest = std::min_element(stamps_.begin(), stamps_.end(),
                                     [](const auto& a, const auto& b) { return a.second < b.second; })->second;
    for (const auto& [id, at] : stamps_)
      if (id < count) ms[id] = std::chrono::duration<double, std::milli>(at - earliest).count();
    return ms;
  }

 private:
  std::mutex mutex_;
  std::map<size_t, std::chrono::steady_clock::time_point> stamps_;
};

}  // namespace

std::unique_ptr<TraceClock> make_host_trace_clock() { return std::make_unique<HostTraceClock>(); }

}  // namespace strider
