// The cores of the process, shared by every CPU session in it.
//
// Why: each CPU queue's worker runs its kernels on an OpenMP team of the session's thread
// count, and OpenMP's teams are per calling thread, so two sessions of two threads each
// running at once on two cores kept four threads busy. A team whose threads are
// descheduled waits at every barrier for a time slice (milliseconds), so oversubscribed
// runs are far slower than the same runs one after the other.
//
// What: a command holds a lease on as many cores as its team may use while it runs
// (WorkerQueue); a lease waits, asleep, until that many are free. So at any moment the
// commands of all sessions keep at most cores() team threads busy, and the cores are
// handed out first come, first served: a waiter is never overtaken by a later one, so a
// two-core run is not starved by a stream of one-core runs.
//
// Deadlock freedom: a lease is taken only after the command's waits are satisfied and is
// released when the command returns; no command waits on another queue while it holds
// one (a CPU command is kernels only), and no lease asks for more than cores().
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace strider::cpu {

class CoreBudget {
 public:
  // The process's budget: the CPUs its affinity mask allows, read once.
  static CoreBudget& process();

  explicit CoreBudget(int cores);
  CoreBudget(const CoreBudget&) = delete;
  CoreBudget& operator=(const CoreBudget&) = delete;

  int cores() const { return cores_; }

  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept : budget_(other.budget_), cores_(other.cores_) { other.budget_ = nullptr; }
    Lease& operator=(Lease&&) = delete;
    ~Lease();
    int cores() const { return cores_; }

   private:
    friend class CoreBudget;
    Lease(CoreBudget* budget, int cores) : budget_(budget), cores_(cores) {}
    CoreBudget* budget_ = nullptr;
    int cores_ = 0;
  };

  // Blocks until `wanted` cores (clamped to [1, cores()]) are free, then holds them until
  // the lease is destroyed.
  Lease acquire(int wanted);

  // Leases asked for and not yet granted (for tests).
  int waiting() const;

 private:
  void release(int cores);

  const int cores_;
  mutable std::mutex mutex_;
  std::condition_variable freed_;
  int free_;
  uint64_t next_ticket_ = 0, serving_ = 0;  // first come, first served
};

// The CPUs this process may run on (sched_getaffinity), at least 1.
int process_cores();

}  // namespace strider::cpu
