#include "hal/cpu/own_team.h"

#include <immintrin.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string_view>
#include <thread>
#include <vector>

namespace strider::cpu {
namespace {

// How long an idle team thread polls before it sleeps: about one futex wake-up on these VMs.
constexpr auto kIdlePoll = std::chrono::microseconds(300);

thread_local bool thread_in_part = false;

// One team thread's mailbox: the master writes the part and bumps `epoch`; the thread
// writes `done` = epoch when its part returned. Each on its own cache line.
struct alignas(64) Mailbox {
  std::atomic<uint64_t> epoch{0};
  std::atomic<bool> sleeping{false};
  void (*part)(void*, int) = nullptr;
  void* context = nullptr;
  int index = 0;
};
struct alignas(64) Completion {
  std::atomic<uint64_t> done{0};
};

constexpr uint64_t kStop = UINT64_MAX;

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
    thread_in_part = false;
    for (int i = 0; i + 1 < threads; ++i)
      while (completions_[size_t(i)]->done.load(std::memory_order_acquire) != epoch) _mm_pause();
  }

 private:
  void grow_to(int workers) {
    while (int(threads_.size()) < workers) {
      const size_t i = threads_.size();
      mailboxes_.push_back(std::make_unique<Mailbox>());
      completions_.push_back(std::make_unique<Completion>());
      // Started at the current epoch, so the new thread waits for the next part.
      mailboxes_[i]->epoch.store(epoch_, std::memory_order_relaxed);
      completions_[i]->done.store(epoch_, std::memory_order_relaxed);
      threads_.emplace_back([box = mailboxes_[i].get(), completion = completions_[i].get(), seen = epoch_] {
        serve(*box, *completion, seen);
      });
    }
  }

  // A team thread: poll for a part, then sleep until one comes (the master notifies only
  // a sleeper: `sleeping` and `epoch` are a Dekker pair, both sequentially consistent).
  static void serve(Mailbox& box, Completion& completion, uint64_t seen) {
    while (true) {
      uint64_t epoch = box.epoch.load(std::memory_order_acquire);
      const auto until = std::chrono::steady_clock::now() + kIdlePoll;
      for (int polls = 0; epoch == seen; epoch = box.epoch.load(std::memory_order_acquire)) {
        _mm_pause();
        if (++polls % 256 == 0 && std::chrono::steady_clock::now() > until) {
          box.sleeping.store(true, std::memory_order_seq_cst);
          epoch = box.epoch.load(std::memory_order_seq_cst);
          if (epoch == seen) box.epoch.wait(seen, std::memory_order_seq_cst);
          box.sleeping.store(false, std::memory_order_relaxed);
        }
      }
      if (epoch == kStop) return;
      seen = epoch;
      thread_in_part = true;
      box.part(box.context, box.index);
      thread_in_part = false;
      completion.done.store(epoch, std::memory_order_release);
    }
  }

  std::vector<std::unique_ptr<Mailbox>> mailboxes_;
  std::vector<std::unique_ptr<Completion>> completions_;
  std::vector<std::thread> threads_;
  uint64_t epoch_ = 0;
};

}  // namespace

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
  team.run(threads, part, context);
}

}  // namespace strider::cpu
