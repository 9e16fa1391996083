#include "hal/cpu/own_team.h"

#include <immintrin.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

namespace strider::cpu {
namespace {

// How long an idle team thread polls before it sleeps: about one futex wake-up on these VMs.
constexpr auto kIdlePoll = std::chrono::microseconds(300);

// The team whose master handed out parts last: an idle team thread polls only while that is
// its own team. Each thread that runs kernels (a server's connection thread running its
// request inline) is a master with a team of its own, so a server on two cores had eight
// teams for eight clients; each idle team thread polled 300 us after every part, taking the
// core that the one master then running (the model's instance is one at a time) needed for
// its own team thread, while that master spun waiting for it: C2f unbatched fell from 1223
// requests/s at one client to 146 at eight (1381 with one thread per instance). One master
// (a session's worker, a lone caller) forks every time, so its team polls as before.
std::atomic<const void*> last_forking_team{nullptr};
// Pauses (about 10-40 ns each) a master spins for its team before it yields between polls.
constexpr int kMasterSpins = 2000;

thread_local bool thread_in_part = false;

// One team thread's mailbox: the master writes the part and bumps `epoch`; the thread
// writes `done` = epoch when its part returned. Each on its own cache line.
struct alignas(64) Mailbox {
  std::atomic<uint64_t> epoch{0};
  // The last epoch whose part was taken, by this mailbox's thread or by the master (the
  // first to raise it to an epoch runs that epoch's part; see claim and Team::run).
  std::atomic<uint64_t> claimed{0};
  std::atomic<bool> sleeping{false};
  void (*part)(void*, int) = nullptr;
  void* context = nullptr;
  int index = 0;
};
struct alignas(64) Completion {
  std::atomic<uint64_t> done{0};
};

constexpr uint64_t kStop = UINT64_MAX;

// Raises `claimed` to `epoch` where it is below: true for the one caller that does. Not an
// exchange: a team thread that read an epoch and lost its core may claim it after the
// master ran that part and handed out the next, and an exchange would then see another
// epoch than its own and take the next part too, beside the master (a server crashed so).
bool claim(std::atomic<uint64_t>& claimed, uint64_t epoch) {
  uint64_t seen = claimed.load(std::memory_order_acquire);
  while (seen < epoch)
    if (claimed.compare_exchange_weak(seen, epoch, std::memory_order_acq_rel, std::memory_order_acquire)) return true;
  return false;
}

class Team {
 public:
  ~Team() {
    for (auto& box : mailboxes_) {
      box->epoch.store(kStop, std::memory_order_seq_cst);
      box->epoch.notify_one();
    }
    for (std::thread& t : threads_) t.join();
  }

  void run(int threads, void (*part)(void*, int), void* context) {
    grow_to(threads - 1);
    last_forking_team.store(this, std::memory_order_relaxed);
    const uint64_t epoch = ++epoch_;
    for (int i = 0; i + 1 < threads; ++i) {
      Mailbox& box = *mailboxes_[size_t(i)];
      box.part = part;
      box.context = context;
      box.index = i + 1;
      box.epoch.store(epoch, std::memory_order_seq_cst);
      if (box.sleeping.load(std::memory_order_seq_cst)) box.epoch.notify_one();
    }
    thread_in_part = true;
    part(context, 0);
    // A part its thread has not taken yet is run here: that thread was asleep or had no
    // core when its part came (a server's connection threads and clients outnumber the
    // cores; a futex wake-up costs 50-300 us on these VMs), and waiting for it is slower
    // than the part. Under an open loop of 64 connections at 200 requests/s on two vCPUs
    // the masters yielded ~1000 times a request waiting for woken team threads: p50 6.4 ms
    // against 1.1 ms with one thread per kernel.
    for (int i = 0; i + 1 < threads; ++i)
      if (claim(mailboxes_[size_t(i)]->claimed, epoch)) {
        part(context, i + 1);
        completions_[size_t(i)]->done.store(epoch, std::memory_order_relaxed);
      }
    thread_in_part = false;
    // Spin for the parts team threads took, yielding the core after a while: a thread
    // running one may have lost its core (more runnable threads than cores), and a master
    // spinning on through its time slice only delays it.
    for (int i = 0; i + 1 < threads; ++i)
      for (int polls = 0; completions_[size_t(i)]->done.load(std::memory_order_acquire) != epoch; ++polls) {
        _mm_pause();
        if (polls > kMasterSpins) std::this_thread::yield();
      }
  }

 private:
  void grow_to(int workers) {
    while (int(threads_.size()) < workers) {
      const size_t i = threads_.size();
      mailboxes_.push_back(std::make_unique<Mailbox>());
      completions_.push_back(std::make_unique<Completion>());
      // Started at the current epoch, so the new thread waits for the next part.
      mailboxes_[i]->epoch.store(epoch_, std::memory_order_relaxed);
      mailboxes_[i]->claimed.store(epoch_, std::memory_order_relaxed);
      completions_[i]->done.store(epoch_, std::memory_order_relaxed);
      threads_.emplace_back([this, box = mailboxes_[i].get(), completion = completions_[i].get(), seen = epoch_] {
        serve(this, *box, *completion, seen);
      });
    }
  }

  // A team thread: poll for a part, then sleep until one comes (the master notifies only
  // a sleeper: `sleeping` and `epoch` are a Dekker pair, both sequentially consistent).
  static void serve(const Team* team, Mailbox& box, Completion& completion, uint64_t seen) {
    while (true) {
      const uint64_t epoch = wait_for_part(team, box, seen);
      if (epoch == kStop) return;
      seen = epoch;
      if (!claim(box.claimed, epoch)) continue;  // the master ran it
      thread_in_part = true;
      box.part(box.context, box.index);
      thread_in_part = false;
      completion.done.store(epoch, std::memory_order_release);
    }
  }

  // The next epoch after `seen`: polled for up to kIdlePoll while `team` is the last to have
  // forked, then (or at once) slept for.
  static uint64_t wait_for_part(const Team* team, Mailbox& box, uint64_t seen) {
    uint64_t epoch = box.epoch.load(std::memory_order_acquire);
    const auto until = std::chrono::steady_clock::now() + kIdlePoll;
    for (int polls = 0; epoch == seen; epoch = box.epoch.load(std::memory_order_acquire)) {
      _mm_pause();
      if (++polls % 256 == 0 && (last_forking_team.load(std::memory_order_relaxed) != team ||
                                 std::chrono::steady_clock::now() > until))
        break;
    }
    while (epoch == seen) {
      box.sleeping.store(true, std::memory_order_seq_cst);
      epoch = box.epoch.load(std::memory_order_seq_cst);
      if (epoch == seen) box.epoch.wait(seen, std::memory_order_seq_cst);
      box.sleeping.store(false, std::memory_order_relaxed);
      epoch = box.epoch.load(std::memory_order_acquire);
    }
    return epoch;
  }

  std::vector<std::unique_ptr<Mailbox>> mailboxes_;
  std::vector<std::unique_ptr<Completion>> completions_;
  std::vector<std::thread> threads_;
  uint64_t epoch_ = 0;
};

// The team a ScopedSessionTeam put in place on this thread, or null.
thread_local Team* scoped_team = nullptr;

}  // namespace

class SessionTeam {
 public:
  std::mutex busy;  // held by the thread whose runs use `team`
  Team team;
};

std::shared_ptr<SessionTeam> make_session_team() { return std::make_shared<SessionTeam>(); }

ScopedSessionTeam::ScopedSessionTeam(SessionTeam* team) {
  if (!team || !team->busy.try_lock()) return;  // in use by another caller: this thread's own
  held_ = team;
  previous_ = scoped_team;
  scoped_team = &team->team;
}

ScopedSessionTeam::~ScopedSessionTeam() {
  if (!held_) return;
  scoped_team = static_cast<Team*>(previous_);
  held_->busy.unlock();
}

bool own_team_enabled() {
  static const bool enabled = [] {
    const char* env = std::getenv("STRIDER_CPU_TEAM");
    return !(env && std::string_view(env) == "openmp");
  }();
  return enabled;
}

bool in_own_team_part() { return thread_in_part; }

void run_on_own_team(int threads, void (*part)(void*, int), void* context) {
  if (threads <= 1) {
    part(context, 0);
    return;
  }
  thread_local Team team;
  (scoped_team ? *scoped_team : team).run(threads, part, context);
}

}  // namespace strider::cpu
