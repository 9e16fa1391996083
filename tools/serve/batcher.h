// Dynamic batching for one model: requests queue up, and each of the model's instances takes
// the oldest request and merges it along dim 0 with the requests behind it that fit (the
// same dtypes and the same sizes in every dim after the first), until the merged batch holds
// `max_batch` rows or the oldest request has waited `max_delay`; the merged inputs run as one
// call, and each request gets its own rows of every output back.
//
// Which models batch: every input and every output has an open dim 0 (the model's batch
// dim); others are served unbatched (batchable() says why not). A request of more than
// `max_batch` rows runs alone. No padding: a merged batch runs at its exact size (a model
// whose batch rows interact would otherwise be silently wrong), so each size is its own plan
// in the instance's DynamicSession cache; the sizes 1, 2, 4, ... and max_batch are planned
// at load.
//
// Deadlines: a request whose deadline passes while it waits is answered with an error and
// never runs. Threads: submit() from any thread; one thread per instance runs the batches;
// the destructor lets the queue drain and joins them.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "strider/dynamic_session.h"

namespace strider::serve {

using Clock = std::chrono::steady_clock;

struct BatchStats {
  std::atomic<int64_t> batches{0}, rows{0};
  std::atomic<int64_t> by_size[8] = {};  // batches of at most 1, 2, 4, ... 64, then more
};

class Batcher {
 public:
  // `sessions`: the model's instances (not owned; they outlive the batcher).
  Batcher(std::vector<DynamicSession*> sessions, int max_batch, std::chrono::microseconds max_delay);
  ~Batcher();
  // Empty when every input and output has an open dim 0; else why the model cannot batch.
  static std::string batchable(const DynamicSession& session);
  // Plans the batch sizes 1, 2, 4, ... and max_batch on every instance where the model's
  // other dims are static.
  Status prepare();

  struct Outcome {
    Result<std::vector<Tensor>> outputs = internal_error("not run");
    Clock::duration queued{}, computed{};
  };
  // Queues one request (inputs by name, every input with the same dim 0).
  std::future<Outcome> submit(std::map<std::string, Tensor> inputs, Clock::time_point deadline);
  const BatchStats& stats() const { return stats_; }

 private:
  struct Pending {
    std::map<std::string, Tensor> inputs;
    int64_t rows = 0;
    Clock::time_point enqueued, deadline;
    std::promise<Outcome> done;
  };
  void serve(DynamicSession* session);
  std::vector<std::unique_ptr<Pending>> take_batch(std::unique_lock<std::mutex>& lock);
  void run_batch(DynamicSession* session, std::vector<std::unique_ptr<Pending>>& batch);

  std::vector<DynamicSession*> sessions_;
  int max_batch_;
  std::chrono::microseconds max_delay_;
  std::mutex mutex_;
  std::condition_variable arrived_;
  std::deque<std::unique_ptr<Pending>> queue_;
  bool stopping_ = false;
  BatchStats stats_;
  std::vector<std::thread> threads_;
};

}  // namespace strider::serve
