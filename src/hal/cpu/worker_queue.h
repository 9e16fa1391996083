// A CPU queue: one worker thread that runs its commands in submission order, each after
// blocking on its waits; submit() returns at once. Destroying the queue finishes what was
// submitted first. `threads` > 0 caps the OpenMP team the worker's kernels (oneDNN's)
// start: OpenMP's thread count is per calling thread, so each session's queues keep their own.
// With `budget`, each command runs under a lease on its team's cores (hal/cpu/core_budget.h),
// so the queues of all sessions together keep at most the process's cores busy.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "hal/cpu/core_budget.h"
#include "hal/host_queue.h"
#include "hal/queue.h"

namespace strider::cpu {

// Sets the calling thread's OpenMP team size to `threads` (> 0) for its lifetime. oneDNN
// fixes a primitive's team size when the primitive is created, from the creating thread's
// setting, and runs it with that many threads wherever it runs: so kernels are created
// under the session's thread count too, or a one-thread session's kernels would start teams
// of the process default on its worker.
class ScopedOmpThreads {
 public:
  explicit ScopedOmpThreads(int threads);
  ~ScopedOmpThreads();
  ScopedOmpThreads(const ScopedOmpThreads&) = delete;
  ScopedOmpThreads& operator=(const ScopedOmpThreads&) = delete;

 private:
  int previous_ = 0;
};

class WorkerQueue final : public Queue {
 public:
  // min_parallel_work > 0 replaces the worker's kMinWorkPerThread (hal/cpu/parallel.h).
  WorkerQueue(int index, std::function<Queue&(int)> queue_of, int threads = 0, int64_t min_parallel_work = 0,
              CoreBudget* budget = nullptr);
  ~WorkerQueue() override;
  int index() const override { return index_; }
  Timepoint next() const override;
  Timepoint submit(Command command) override;
  Status wait(uint64_t value) override;
  // The work itself, as one command: run on this queue's worker, its kernels go in order
  // as their per-step commands would, without a submit, a wake-up and a completion each
  // (a CPU queue's "graph"; the executor captures only a plan with one device queue).
  Result<std::function<Status(const QueueContext&)>> capture(
      const std::function<Status(const QueueContext&)>& work) override {
    return work;
  }
  // The worker's own clock around `work`: what a wake-up and a completion cost stays out.
  Result<double> time(const std::function<Status(const QueueContext&)>& work) override;

 private:
  void loop();
  // Sleeps (woken early by the completion) until shortly before `value`'s expected end,
  // from the last command's length `last`; returns at once for short commands.
  void sleep_through_most_of(uint64_t value, std::chrono::microseconds last);

  int index_;
  std::function<Queue&(int)> queue_of_;
  int threads_;
  int64_t min_parallel_work_;
  CoreBudget* budget_;  // null: this queue's commands take no lease
  mutable std::mutex mutex_;
  std::condition_variable work_ready_, work_done_;
  std::deque<Command> pending_;
  uint64_t submitted_ = 0, completed_ = 0;
  // The smallest timepoint a waiter sleeps for: the worker wakes waiters only when it gets
  // there, not after every command (a host waiting for a run's last step slept and woke
  // once per step: two futex calls and two context switches each).
  uint64_t wake_at_ = UINT64_MAX;
  // Mirrors of completed_ and of the pending count, read without the mutex by a waiter and
  // by the idle worker, which spin on them for a few microseconds before sleeping: on these
  // machines a sleeping thread took 20-60 us to wake (a one-node model's run() was 8 us
  // with the other core busy and 60 us with it idle), more than most kernels take.
  std::atomic<uint64_t> completed_seen_{0};
  std::atomic<size_t> pending_seen_{0};
  // A waiter spins only when the worker's team leaves it a core: otherwise it would take
  // one from the team (PointwiseC2f, 2 threads on 2 cores: run() 0.10 -> 0.17 ms). Or when
  // the worker's last command started no team (every kernel small enough for one thread,
  // hal/cpu/parallel.h): then the other cores idle, and a run of the same plan most likely
  // starts none either. A first command counts as one that did.
  bool spin_waits_;
  std::atomic<bool> last_command_started_team_{true};
  // How long the worker's last command ran (us): a spinning waiter polls that long plus
  // kWaitSpin, so a run of several ms ends without the waiter having gone to sleep (its
  // wake-up cost 0.1-0.2 ms here, after the worker finished).
  std::atomic<int64_t> last_command_us_{0};
  // The command the worker runs now (its timepoint; 0 before the first) and when it began:
  // a waiter sleeps until shortly before that command's expected end (sleep_through_most_of).
  uint64_t running_ = 0;
  std::chrono::steady_clock::time_point running_started_;
  Status first_error_;
  bool stopping_ = false;
  std::thread worker_;  // last: starts after everything above exists
};

// An inline queue's command (hal/cpu/cpu_device.h) run in the submitting thread as a
// worker's: that thread may start teams of `threads` (0: the process default) for it, with
// `min_parallel_work` as WorkerQueue takes it, under a lease on the team's cores of
// `budget` (none when null), counted as a busy team. The team's threads are the session's
// (own_team.h's SessionTeam), whichever thread submits.
HostQueue::Around as_team_master(CoreBudget* budget, int threads, int64_t min_parallel_work);

// For tests: the most team threads that commands of any WorkerQueue of the process had
// running at once since the last reset (counted inside the lease, by the worker: what the
// budget must keep at or below the process's cores).
int busy_team_threads_peak();
void reset_busy_team_threads_peak();

}  // namespace strider::cpu
