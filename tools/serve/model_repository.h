// The models a server serves: loaded at start from Triton's repository layout
// (DIR/NAME/VERSION/model.onnx, the highest numbered VERSION; an optional DIR/NAME/config.json
// of strider options) or from NAME=PATH pairs. Each model is K instances (DynamicSessions:
// any input shape per run, one plan per shape, cached) on each device of its device list
// (strider/devices.h: "cuda:all", "cuda:0,1", ...), each instance with its own session, so
// its own streams, arena and plans, the K on one device sharing one copy of the weights
// (DynamicSession::load_instances); every instance is
// warmed by one run on zeros with every open dim 1 before the model counts as ready. A
// model that fails to load is kept with its error, by name, and the others serve.
//
// Threads: infer() may be called from any number of threads. A request takes the first free
// instance, else waits for the least loaded (fewest requests waiting on it or running);
// batches go to whichever instance frees first (batcher.h). At most `max_queue` requests per model wait
// or run at once, beyond that infer() is RESOURCE_EXHAUSTED at once (the server's 503), so memory
// never grows with the load. Statistics are atomics, read without locks.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shared_memory.h"
#include "batcher.h"
#include "strider/dynamic_session.h"

namespace strider::serve {

// The steady clock in nanoseconds, for the statistics.
int64_t steady_now_ns();

// Strider options for every model; a model's config.json may override device, dtype,
// threads and instances: {"device": "cuda:all", "dtype": "bf16", "threads": 2, "instances": 2}.
struct ModelDefaults {
  std::string device = "cpu";  // a device list: one device, or several (expand_device_list)
  DType dtype = DType::kF32;
  int threads = 0;
  int instances = 1;  // per device
  int max_queue = 64;  // requests per model waiting or running at once
  // Dynamic batching (batcher.h) when over 1 and the model has a batch dim.
  int max_batch = 0;
  std::chrono::microseconds max_queue_delay{0};  // 0: greedy (batches form while an instance runs)
  bool measure_batch = true;  // cap batches at the size timed fastest per row at load
};

// Per model, as Triton's statistics extension reports them.
struct ModelStats {
  std::atomic<int64_t> success{0}, success_ns{0}, failure{0}, failure_ns{0};
  std::atomic<int64_t> queue_ns{0}, compute_ns{0}, inferences{0}, executions{0};
  std::atomic<int64_t> last_inference_ms{0};
};

class ServedModel {
 public:
  std::string name, version = "1", path;
  std::string error;  // why it did not load; empty when it did
  // Loaded, and at least one instance in rotation.
  bool ready() const { return error.empty() && in_rotation_.load() > 0; }
  // Why ready() is false: the load's error, or the failure of the last instance taken out.
  std::string why_not_ready() const;
  const std::vector<ValueInfo>& inputs() const { return instances_.front()->session->inputs(); }
  const std::vector<ValueInfo>& outputs() const { return instances_.front()->session->outputs(); }
  ModelStats& stats() { return stats_; }
  // Counts one request of any front end, answered or failed, received `start_ns` (steady clock).
  void record(bool ok, int64_t start_ns);
  // Runs of the model: batches when it batches.
  int64_t executions() const { return batcher_ ? batcher_->stats().batches.load() : stats_.executions.load(); }
  const ModelDefaults& options() const { return options_; }
  // Device memory the instances' sessions hold (DynamicSession::device_memory_bytes).
  int64_t device_memory_bytes() const {
    int64_t bytes = 0;
    for (const auto& instance : instances_) bytes += instance->session->device_memory_bytes();
    return bytes;
  }

  // Why the model runs unbatched although batching was asked (empty otherwise).
  std::string batching_note;
  const Batcher* batcher() const { return batcher_.get(); }

  // What /metrics reports per instance.
  struct InstanceState {
    std::string device;
    int index = 0;  // among the model's instances on that device
    int64_t executions = 0;
    bool in_rotation = true;
  };
  std::vector<InstanceState> instance_states() const;

  // Loads the instances and warms them; on failure `error` says why.
  void load(const ModelDefaults& options);
  // Runs one request on a free instance, or through the batcher. RESOURCE_EXHAUSTED when
  // max_queue requests are in already, or when `limits` expire while it waits.
  Result<std::vector<Tensor>> infer(std::map<std::string, Tensor> inputs, const RequestLimits& limits = {});

  // For tests: called with an instance's device and the run's inputs before each of its
  // runs; an error it returns is that run's result, as from a GPU whose context failed (or
  // from a request that makes a kernel fail). Set before serving.
  std::function<Status(const std::string& device, const std::map<std::string, Tensor>& inputs)> fault_for_testing;

 private:
  struct Instance {
    std::unique_ptr<DynamicSession> session;
    std::string device;
    int index = 0;
    std::mutex busy;
    std::atomic<int> load{0};  // requests waiting for it or running on it (unbatched)
    std::atomic<int64_t> executions{0};
    std::atomic<bool> out_of_rotation{false};
  };
  // Runs on the instance (through fault_for_testing).
  Result<std::vector<Tensor>> run_on(Instance& instance, const std::map<std::string, Tensor>& inputs);
  // After a failed run: a DEVICE_ERROR takes the instance out of rotation (reported in the
  // log; false then) if the instance also fails a probe, a run on the warm-up inputs: a
  // request that makes a kernel fail on a healthy device gets its error and takes nothing
  // down. Other errors are the request's own.
  bool keep_after(Instance& instance, const Status& failure);
  Instance& instance_of(const DynamicSession& session);
  Result<std::vector<std::unique_ptr<Instance>>> load_on(const std::string& device, const SessionOptions& session,
                                                          const DynamicSessionOptions& dynamic);
  Instance* least_loaded();
  Result<std::vector<Tensor>> infer_unbatched(const std::map<std::string, Tensor>& inputs, const RequestLimits& limits);
  void start_batching();
  std::vector<std::unique_ptr<Instance>> instances_;
  std::unique_ptr<Batcher> batcher_;  // after instances_: stopped before they go
  std::atomic<int> in_flight_{0};
  std::atomic<int> in_rotation_{0};
  mutable std::mutex failure_mutex_;
  std::string last_failure_;  // under failure_mutex_
  ModelStats stats_;
  ModelDefaults options_;
};

class ModelRepository {
 public:
  // Every model under `dir` (Triton's layout). A folder without a VERSION/model.onnx is a
  // model that failed to load ("no model.onnx under ..."), not an error of the whole.
  Status load_directory(const std::string& dir, const ModelDefaults& defaults);
  // NAME=PATH.
  Status load_model(const std::string& name, const std::string& path, const ModelDefaults& defaults);
  ServedModel* find(const std::string& name);
  const std::vector<std::unique_ptr<ServedModel>>& models() const { return models_; }
  // Loading is over and at least one model is ready.
  bool ready() const;
  // The clients' shared-memory regions, one registry for every front end (shared_memory.h).
  SharedMemoryRegistry& shared_memory() { return shared_memory_; }

 private:
  std::vector<std::unique_ptr<ServedModel>> models_;
  SharedMemoryRegistry shared_memory_;
};

}  // namespace strider::serve
