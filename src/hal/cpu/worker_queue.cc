#include "hal/cpu/worker_queue.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <utility>
#include <immintrin.h>
#include "base/exception_guard.h"
#include "hal/cpu/own_team.h"
#include "hal/cpu/parallel.h"

namespace strider::cpu {

ScopedOmpThreads::ScopedOmpThreads(int threads) {
  if (threads <= 0) return;
  previous_ = omp_get_max_threads();
  omp_set_num_threads(threads);
}

ScopedOmpThreads::~ScopedOmpThreads() {
  if (previous_ > 0) omp_set_num_threads(previous_);
}

namespace {

// How long the idle worker polls before it sleeps: about one wake-up's cost, so spinning
// never costs more than sleeping would have, and an idle queue sleeps within it.
constexpr auto kIdleSpin = std::chrono::microseconds(300);
// How long a waiter polls (only where the session's team leaves it a core of its own):
// a run shorter than this returns without a sleep and a wake-up (20-60 us here), which
// would otherwise be most of a small model's call. Longer runs sleep after it.
constexpr auto kWaitSpin = std::chrono::microseconds(1000);
// The longest a waiter polls for a command as long as the last one (a second's worth of
// spinning for a second-long model would only burn the spare core).
constexpr auto kWaitSpinLongest = std::chrono::microseconds(50000);
// A waiter for a command longer than this sleeps through it until kWakeLead before its
// expected end, then polls: spinning through a 4-ms run kept a second core busy for a
// one-thread session (two one-thread processes on two cores each ran at half speed), and
// the wake-up it saves (10-40 us here) matters only to short commands.
constexpr auto kSleepThroughAbove = std::chrono::microseconds(500);
constexpr auto kWakeLead = std::chrono::microseconds(250);

// Polls `done` until it holds or `budget` has passed; true if it holds.
template <typename Done>
bool spin_until(std::chrono::microseconds budget, Done&& done) {
  const auto until = std::chrono::steady_clock::now() + budget;
  for (int i = 0;; ++i) {
    if (done()) return true;
    _mm_pause();
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > until) return done();
  }
}

std::atomic<int> busy_team_threads{0};
std::atomic<int> busy_team_threads_max{0};

// Counts `threads` as busy while alive (the figure busy_team_threads_peak reports).
class BusyTeam {
 public:
  explicit BusyTeam(int threads) : threads_(threads) {
    const int now = busy_team_threads.fetch_add(threads_, std::memory_order_relaxed) + threads_;
    int seen = busy_team_threads_max.load(std::memory_order_relaxed);
    while (now > seen && !busy_team_threads_max.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
    }
  }
  ~BusyTeam() { busy_team_threads.fetch_sub(threads_, std::memory_order_relaxed); }
  BusyTeam(const BusyTeam&) = delete;
  BusyTeam& operator=(const BusyTeam&) = delete;

 private:
  int threads_;
};

}  // namespace

HostQueue::Around as_team_master(CoreBudget* budget, int threads, int64_t min_parallel_work) {
  std::shared_ptr<SessionTeam> session_team = own_team_enabled() ? make_session_team() : nullptr;
  return [budget, threads, min_parallel_work, session_team](const std::function<Status()>& work) {
    ScopedOmpThreads setting(threads);
    ScopedSessionTeam team_of_the_session(session_team.get());
    const int team = omp_get_max_threads();
    CoreBudget::Lease lease = budget ? budget->acquire(team) : CoreBudget::Lease();
    BusyTeam busy(team);
    // The thread's own settings come back after: it may be a caller that runs other code.
    const bool starts = std::exchange(thread_starts_teams, true);
    const int64_t min_work = thread_min_work_per_thread;
    if (min_parallel_work > 0) thread_min_work_per_thread = min_parallel_work;
    Status status = work();
    thread_starts_teams = starts;
    thread_min_work_per_thread = min_work;
    return status;
  };
}

int busy_team_threads_peak() { return busy_team_threads_max.load(std::memory_order_relaxed); }
void reset_busy_team_threads_peak() { busy_team_threads_max.store(0, std::memory_order_relaxed); }

WorkerQueue::WorkerQueue(int index, std::function<Queue&(int)> queue_of, int threads, int64_t min_parallel_work,
                         CoreBudget* budget)
    : index_(index), queue_of_(std::move(queue_of)), threads_(threads), min_parallel_work_(min_parallel_work),
      budget_(budget),
      spin_waits_(threads > 0 && unsigned(threads) < std::thread::hardware_concurrency()),
      worker_([this] { loop(); }) {}

WorkerQueue::~WorkerQueue() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  worker_.join();
}

Timepoint WorkerQueue::next() const {
  std::lock_guard lock(mutex_);
  return {index_, submitted_ + 1};
}

Timepoint WorkerQueue::submit(Command command) {
  Timepoint at;
  {
    std::lock_guard lock(mutex_);
    pending_.push_back(std::move(command));
    pending_seen_.store(pending_.size(), std::memory_order_release);
    at = {index_, ++submitted_};
  }
  work_ready_.notify_one();
  return at;
}

Status WorkerQueue::wait(uint64_t value) {
  if (spin_waits_ || !last_command_started_team_.load(std::memory_order_relaxed)) {
    const auto last = std::chrono::microseconds(last_command_us_.load(std::memory_order_relaxed));
    sleep_through_most_of(value, last);
    // Bounded: a command much longer than the last one (a first run, another model's) still
    // ends in a sleep, so a waiter never burns its core for long.
    const auto budget = kWaitSpin + std::min(kWaitSpinLongest, last / 4);
    spin_until(budget, [&] { return completed_seen_.load(std::memory_order_acquire) >= value; });
  }
  std::unique_lock lock(mutex_);
  while (completed_ < value && value <= submitted_) {
    wake_at_ = std::min(wake_at_, value);  // re-registered after every wake-up
    work_done_.wait(lock);
  }
  if (value > submitted_) return internal_error("wait for a timepoint never submitted");
  return first_error_;
}

void WorkerQueue::sleep_through_most_of(uint64_t value, std::chrono::microseconds last) {
  if (last <= kSleepThroughAbove) return;
  std::unique_lock lock(mutex_);
  // The end expected of `value`: the running command's start plus the last command's
  // length, and one such length more for each command queued before it.
  const uint64_t ahead = value > completed_ + 1 ? value - completed_ - 1 : 0;
  const auto started = running_ == completed_ + 1 ? running_started_ : std::chrono::steady_clock::now();
  const auto until = started + last * int64_t(1 + ahead) - kWakeLead;
  while (completed_ < value && value <= submitted_ && std::chrono::steady_clock::now() < until) {
    wake_at_ = std::min(wake_at_, value);  // an early completion still wakes this waiter
    work_done_.wait_until(lock, until);
  }
}

Result<double> WorkerQueue::time(const std::function<Status(const QueueContext&)>& work) {
  double ms = 0;
  Timepoint done = submit(Command{"timed", [&work, &ms](const QueueContext& context) {
                                    // This worker's team may have gone to sleep while the
                                    // caller waited between timed commands; a kernel that
                                    // wakes it waits ~1 ms for a vCPU (a C2f step on the
                                    // second of two queues: 0.01 -> 1.0 ms). Woken first, it
                                    // is polling when the kernel hands it parts, as in a run.
                                    if (own_team_enabled() && max_parallel_threads() > 1)
                                      run_on_own_team(max_parallel_threads(), [](void*, int) {}, nullptr);
                                    auto start = std::chrono::steady_clock::now();
                                    Status status = work(context);
                                    ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
                                    return status;
                                  }, {}});
  STRIDER_RETURN_IF_ERROR(wait(done.value));
  return ms;
}

void WorkerQueue::loop() {
  if (threads_ > 0) omp_set_num_threads(threads_);
  const int team = omp_get_max_threads();  // the threads a kernel's team may have
  thread_starts_teams = true;  // this thread's team is the session's (hal/cpu/parallel.h)
  if (min_parallel_work_ > 0) thread_min_work_per_thread = min_parallel_work_;
  while (true) {
    Command command;
    spin_until(kIdleSpin, [&] { return pending_seen_.load(std::memory_order_acquire) > 0; });
    {
      std::unique_lock lock(mutex_);
      work_ready_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
      if (pending_.empty()) return;  // stopping, and everything submitted has run
      command = std::move(pending_.front());
      pending_.pop_front();
      pending_seen_.store(pending_.size(), std::memory_order_release);
    }
    Status status;
    for (const Timepoint& w : command.waits) {
      Status waited = queue_of_(w.queue).wait(w.value);
      if (!waited.is_ok() && status.is_ok()) status = waited;
    }
    if (status.is_ok() && command.work) {
      CoreBudget::Lease lease = budget_ ? budget_->acquire(team) : CoreBudget::Lease();
      BusyTeam busy(team);
      const auto start = std::chrono::steady_clock::now();
      {
        std::lock_guard lock(mutex_);
        running_ = completed_ + 1;
        running_started_ = start;
      }
      thread_started_team = false;
      status = guard(command.label, [&] { return command.work(QueueContext{index_, nullptr}); });
      last_command_started_team_.store(thread_started_team, std::memory_order_relaxed);
      last_command_us_.store(
          std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count(),
          std::memory_order_relaxed);
    }
    bool wake = false;
    {
      std::lock_guard lock(mutex_);
      if (!status.is_ok() && first_error_.is_ok()) first_error_ = status.with_context(command.label);
      ++completed_;
      completed_seen_.store(completed_, std::memory_order_release);
      if (completed_ >= wake_at_) {
        wake = true;
        wake_at_ = UINT64_MAX;
      }
    }
    if (wake) work_done_.notify_all();
  }
}

}  // namespace strider::cpu
