// Executor: runs a plan's steps on a device's queues, asynchronously.
//
// Every command declares the memory it reads and writes (its operands' views on their root
// allocations); the hazard tracker turns those into waits, so a read is always ordered
// after the write it depends on, and a write after the reads of the bytes it overwrites
// (arena reuse included). The host is a queue too: uploading inputs is a host command that
// writes the input views, downloading outputs one that reads the output views, so the host
// reads a result only once its producer has completed.
//
// Steps go to queues by branch: a step takes the queue of its first producer unless that
// producer already handed its queue to another consumer, in which case it takes the least
// busy queue; so independent branches (a detection head's box and class branches) run on
// different queues. With --debug-drop-waits (a testing aid) every cross-queue wait is
// dropped; the sanitizer, when on, checks the waits actually submitted.
//
// With one device queue that can capture (CUDA), the steps are captured once as a graph
// and each run submits that graph as one command whose accesses are all the steps'.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <vector>

#include "exec/hazard_tracker.h"
#include "exec/sanitizer.h"
#include "hal/device.h"
#include "plan/plan.h"
#include "strider/tools.h"

namespace strider {

struct ExecutorOptions {
  bool sanitize = false;
  bool drop_waits = false;  // testing aid: drop every cross-queue wait
  bool poison = false;      // poison each buffer before its first writer
  bool graphs = true;       // capture all steps once as one replayable unit where the device can
};

class Executor {
 public:
  // `kernels` has one entry per plan step (null where nothing runs); all are borrowed and
  // must outlive the executor, like the graph, plan and device.
  Executor(const Graph& graph, const Plan& plan, const std::vector<std::unique_ptr<Kernel>>& kernels, Device& device,
           const ExecutorOptions& options);

  // Uploads inputs (already in the plan's dtypes), runs every step, downloads outputs.
  // Errors: a kernel's, or with the sanitizer on, a HAZARD status listing its findings.
  Result<std::vector<Tensor>> run(const std::vector<Tensor>& inputs);
  // The same, one step at a time (no captured graph), also downloading every kernel step's
  // outputs right after the step, through the hazard tracker: so a value is read before
  // any later step reuses its bytes, and the plan is exactly the one `run` executes.
  // `taps` receives them by value id. For `strider check` finding the first bad node.
  Result<std::vector<Tensor>> run(const std::vector<Tensor>& inputs, std::map<ValueId, Tensor>* taps);
  // The same, downloading into `outputs` (one per graph output): a tensor that already has
  // its output's dtype and sizes (a caller's, borrowed or not) is written in place.
  Status run_into(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs, std::map<ValueId, Tensor>* taps);
  // Runs the steps alone: for a plan bound to the caller's memory (inputs already there,
  // outputs written there), nothing to upload or download.
  Status run_in_place();

  const std::vector<int>& queue_of_step() const { return queue_of_step_; }
  // True when the steps run as one captured graph (one device queue, capture supported).
  bool uses_graph() const { return static_cast<bool>(captured_); }

  // Runs just the steps once more on the inputs already uploaded, leaving the outputs on
  // the device, and returns the device time in ms (the benchmark's figure).
  // INVALID_ARGUMENT before the first successful run.
  Result<double> time_steps();
  // Runs each step once more on its own (in plan order, each after the previous one
  // finished) and returns each step's device time in ms, 0 where nothing runs: where the
  // time goes (`strider bench --profile`). Slower than a run: no step overlaps another.
  Result<std::vector<double>> time_each_step();
  // Runs as run() does, step by step, each command stamped on the device's trace clock
  // (hal/trace_clock.h); every command in submission order (strider/tools.h trace_run).
  Result<std::vector<TraceEvent>> trace(const std::vector<Tensor>& inputs);
  Status needs_inputs(std::string_view what) const;

 private:
  // Submits `work` to `queue` after the waits its accesses need. `accesses` are copied
  // into the tracker's history; submit_lasting's are this executor's own lists (the same
  // every run) and are recorded by address, so a run copies no views.
  Timepoint submit(int queue, std::string label, std::function<Status(const QueueContext&)> work,
                   const std::vector<MemoryAccess>& accesses);
  Timepoint submit_lasting(int queue, std::string label, std::function<Status(const QueueContext&)> work,
                           const std::vector<MemoryAccess>& accesses);
  Timepoint submit_after(int queue, std::string label, std::function<Status(const QueueContext&)> work,
                         std::span<const MemoryAccess> accesses, std::vector<Timepoint> waits);
  // What a traced run records as it submits: each command and the waits it was given.
  struct TracedCommand {
    std::string label;
    Timepoint at;
    std::vector<Timepoint> waits;
  };
  struct Tracing {
    TraceClock* clock = nullptr;
    std::vector<TracedCommand> commands;
  };
  std::vector<TraceEvent> trace_events(const Tracing& tracing, const std::vector<double>& stamps) const;
  void assign_queues();
  void describe_steps();
  void submit_poison(const PlanBuffer& buffer, int queue);
  void submit_taps(const PlanStep& step, std::map<ValueId, Tensor>& taps);
  void submit_steps(std::map<ValueId, Tensor>* taps);
  Status finish_run();
  void try_capture();
  Status run_all_kernels(const QueueContext& context) const;

  const Graph& graph_;
  const Plan& plan_;
  const std::vector<std::unique_ptr<Kernel>>& kernels_;
  Device& device_;
  ExecutorOptions options_;
  std::vector<int> queue_of_step_;
  std::vector<std::vector<MemoryAccess>> step_accesses_;
  std::vector<std::string> step_labels_;
  std::vector<std::vector<int>> buffers_first_written_at_;  // per step: arena buffers first written there
  std::function<Status(const QueueContext&)> captured_;  // the captured steps, when there is one
  std::vector<MemoryAccess> captured_accesses_;          // every step's accesses
  std::vector<MemoryAccess> input_accesses_, output_accesses_;  // the uploads' writes, the downloads' reads
  std::string upload_label_, download_label_;
  std::atomic<bool> inputs_present_{false};  // a run succeeded: the steps' inputs are in place
  HazardTracker tracker_;
  std::unique_ptr<Sanitizer> sanitizer_;
  Tracing* tracing_ = nullptr;  // set during trace(): submit_after stamps each command
};

}  // namespace strider
