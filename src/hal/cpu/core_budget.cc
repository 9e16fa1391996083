#include "hal/cpu/core_budget.h"

#include <sched.h>

#include <algorithm>

namespace strider::cpu {

int process_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

CoreBudget& CoreBudget::process() {
  // Never destroyed: a session destroyed during static destruction (a Python interpreter
  // finalizing after it) may still lease cores.
  static CoreBudget* budget = new CoreBudget(process_cores());
  return *budget;
}

CoreBudget::CoreBudget(int cores) : cores_(std::max(1, cores)), free_(cores_) {}

CoreBudget::Lease::~Lease() {
  if (budget_ != nullptr) budget_->release(cores_);
}

CoreBudget::Lease CoreBudget::acquire(int wanted) {
  const int cores = std::clamp(wanted, 1, cores_);
  std::unique_lock lock(mutex_);
  const uint64_t ticket = next_ticket_++;
  freed_.wait(lock, [&] { return serving_ == ticket && free_ >= cores; });
  free_ -= cores;
  ++serving_;
  lock.unlock();
  freed_.notify_all();  // the next ticket may fit in what is left
  return Lease(this, cores);
}

int CoreBudget::waiting() const {
  std::lock_guard lock(mutex_);
  return int(next_ticket_ - serving_);
}

void CoreBudget::release(int cores) {
  {
    std::lock_guard lock(mutex_);
    free_ += cores;
  }
  freed_.notify_all();
}

}  // namespace strider::cpu
