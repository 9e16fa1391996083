// Dynamic batching for one model: requests queue up, and each of the model's instances takes
// the oldest request and merges it along dim 0 with the requests behind it that fit (the
// same dtypes and the same sizes in every dim after the first), once the mergeable rows
// reach `max_batch` or the oldest request has waited `max_delay`; the merged inputs run as
// one call, and each request gets its own rows of every output back. With a delay of 0
// (the default) batching is greedy: a free instance takes what is queued at once, so
// batches form only while the instances are busy, and one client never waits for others.
//
// Which models batch: every input and every output has an open dim 0 (the model's batch
// dim); others are served unbatched (batchable() says why not). A request of more than
// `max_batch` rows runs alone. No padding: a merged batch runs at its exact size (a model
// whose batch rows interact would otherwise be silently wrong), so each size is its own plan
// in the instance's DynamicSession cache; every size up to max_batch (up to 64, then powers
// of two) is planned and timed at load where the model's other dims are static, and batches
// are capped at the size that ran fastest per row.
//
// Deadlines: a request whose deadline passes or whose client goes away while it waits is
// answered with an error and never runs. Threads: there are none of the batcher's own. submit() blocks its caller until
// its request is answered, and a waiting caller that finds an instance free and requests
// queued runs the next batch itself (its own request or others'), so one client's request
// runs on its own thread with no hand-off (a hand-off to a batching thread cost one client
// 4-13% of its requests per second on two cores).
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "strider/dynamic_session.h"

namespace strider::serve {

using Clock = std::chrono::steady_clock;

// When a request stops being worth running: its deadline (the request's timeout, a gRPC
// client's deadline), or its client gone (`cancelled`, where the front end can tell: gRPC).
struct RequestLimits {
  Clock::time_point deadline = Clock::time_point::max();
  std::function<bool()> cancelled;  // may be empty
  // Why the request should not run now, or empty.
  std::string expired(Clock::time_point now) const {
    if (now >= deadline) return "the request's timeout passed while it waited";
    if (cancelled && cancelled()) return "the client went away while the request waited";
    return {};
  }
};

struct BatchStats {
  std::atomic<int64_t> batches{0}, rows{0};
  std::atomic<int64_t> by_size[8] = {};  // batches of at most 1, 2, 4, ... 64, then more
};

class Batcher {
 public:
  // How a batch runs on an instance: its session's run, or what the owner puts around it.
  using RunFn = std::function<Result<std::vector<Tensor>>(DynamicSession&, const std::map<std::string, Tensor>&)>;
  // Asked after a batch failed on `session`: false takes the instance out of rotation (its
  // device failed), and the batch's requests go back to the head of the queue for the
  // others; when none is left, every request waiting is answered with that error.
  using KeepFn = std::function<bool(DynamicSession&, const Status&)>;

  // `sessions`: the model's instances (not owned; they outlive the batcher).
  // `measured`: prepare() may lower max_batch to the fastest size per row; else it stays.
  Batcher(std::vector<DynamicSession*> sessions, int max_batch, std::chrono::microseconds max_delay,
          bool measured = true, RunFn run = {}, KeepFn keep = {});
  // Empty when every input and output has an open dim 0; else why the model cannot batch.
  static std::string batchable(const DynamicSession& session);
  // How much less time per row a larger batch must take at load to be merged into: the
  // timing sees only the run, not the merging copies, the split and the wake-ups of the
  // requests that waited for a leader. On a CPU a batch often costs as much per row as one
  // request: C2f on two cores timed 0.242 ms a row alone and 0.218 in twos (10% less), and
  // once the CPU team stopped stalling unbatched runs (session 29) batches of two ran at
  // 0.87-0.93x the requests per second of one at a time at 8 clients.
  static constexpr double kMergeMargin = 0.15;

  // Where the model's other dims are static: plans every batch size on every instance and
  // times it (zeros in), and lowers max_batch to the smallest size whose time per row is
  // within kMergeMargin of the best (merging more only adds latency). Elsewhere sizes
  // plan on first use.
  Status prepare();
  int max_batch() const { return max_batch_; }
  // Seconds per row of each batch size 1, 2, ... that prepare() timed (empty if it did not).
  const std::vector<double>& row_seconds() const { return row_seconds_; }

  struct Outcome {
    Result<std::vector<Tensor>> outputs = internal_error("not run");
    Clock::duration queued{}, computed{};
  };
  // Runs one request (inputs by name, every input with the same dim 0) in some batch.
  Outcome submit(std::map<std::string, Tensor> inputs, const RequestLimits& limits);
  const BatchStats& stats() const { return stats_; }
  // Batches `session` (one of the constructor's) has run.
  int64_t executions_of(const DynamicSession* session) const { return executions_.at(session).load(); }

 private:
  struct Pending {
    std::map<std::string, Tensor> inputs;
    int64_t rows = 0;
    Clock::time_point enqueued;
    const RequestLimits* limits = nullptr;  // the caller's
    bool done = false;  // under mutex_; `outcome` and `share` are written before it is set
    Outcome outcome;
    // A merged batch's outputs, shared by its requests, and where this one's rows are.
    struct Share {
      std::shared_ptr<const std::vector<Tensor>> outputs;
      int64_t first = 0, total = 0;
    } share;
    // Wakes this request's caller alone: when it is answered, or when it is the oldest
    // left and an instance freed (it leads the next batch). With one condition for all,
    // each batch woke every waiting caller: 64 clients on two cores ran 0.93x unbatched.
    std::condition_variable wake;
  };
  void answer(const std::vector<Pending*>& batch);  // under mutex_
  void requeue(const std::vector<Pending*>& batch);  // under mutex_: to the head, in order
  void answer_all_queued(const Status& why);         // under mutex_
  std::vector<Pending*> take_batch(std::unique_lock<std::mutex>& lock);
  Status run_batch(DynamicSession* session, std::vector<Pending*>& batch);  // the run's status
  void take_rows(Pending& p) const;  // its rows of a shared batch output, into its outcome
  const HostBuffer& merge_buffer(DynamicSession* session, const std::string& name, const Tensor& row_of, int64_t rows);

  std::vector<DynamicSession*> sessions_;
  int max_batch_;
  std::chrono::microseconds max_delay_;
  bool measured_;
  std::mutex mutex_;
  std::condition_variable forming_;  // a request queued: for leaders waiting out a delay
  std::deque<Pending*> queue_;       // the callers' own, alive until answered
  std::vector<DynamicSession*> free_;
  RunFn run_;
  KeepFn keep_;
  int in_rotation_;     // under mutex_: instances not taken out
  Status last_failure_;  // under mutex_: why the last one was
  // Per instance, by input name: where its merged inputs are assembled, in memory its
  // device uploads fastest (pinned on cuda: one DMA, no staging copy). Entries made at
  // construction; each inner map is touched only by the caller holding that instance.
  std::map<const DynamicSession*, std::map<std::string, HostBuffer>> merge_buffers_;
  std::map<const DynamicSession*, std::atomic<int64_t>> executions_;  // keys fixed at construction
  std::vector<double> row_seconds_;
  BatchStats stats_;
};

}  // namespace strider::serve
