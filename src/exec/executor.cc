#include "exec/executor.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "base/float16.h"

namespace strider {
namespace {

// The step that writes the bytes `v` reads: its producer, or for a view, its source's.
NodeId writer_of(const Graph& graph, const Plan& plan, ValueId v) {
  while (plan.values[size_t(v)] && plan.values[size_t(v)]->role == ValueRole::kView) v = plan.values[size_t(v)]->alias_of;
  return graph.value(v).producer;
}

// One element of NaN (floats) or 0xA5 bytes (everything else), repeated over `bytes`.
void fill_poison(std::byte* bytes, int64_t size, DType dtype) {
  if (!is_floating(dtype)) {
    std::memset(bytes, 0xA5, size_t(size));
    return;
  }
  // All-ones is a quiet NaN in f32, f64, f16 and bf16 alike.
  std::memset(bytes, 0xFF, size_t(size));
}

}  // namespace

Executor::Executor(const Graph& graph, const Plan& plan, const std::vector<std::unique_ptr<Kernel>>& kernels,
                   Device& device, const ExecutorOptions& options)
    : graph_(graph), plan_(plan), kernels_(kernels), device_(device), options_(options),
      tracker_(device.num_queues()) {
  if (options.sanitize) sanitizer_ = std::make_unique<Sanitizer>(device.num_queues());
  describe_steps();
  assign_queues();
  // The host (uploads, downloads, taps) and the queues the steps went to: a queue no step
  // uses never records, and must not hold the tracker's history (HazardTracker's `used`).
  std::vector<bool> used(size_t(device.num_queues()), false);
  used[kHostQueue] = true;
  if (used.size() > 1) used[1] = true;  // the first device queue: a captured run's, even with no kernel in it
  for (size_t s = 0; s < plan_.steps.size(); ++s)
    if (kernels_[s]) used[size_t(queue_of_step_[s])] = true;
  tracker_ = HazardTracker(device.num_queues(), std::move(used));
  if (options.graphs && !options.poison && device.num_queues() == 2) try_capture();
}

Status Executor::run_all_kernels(const QueueContext& context) const {
  for (size_t s = 0; s < kernels_.size(); ++s)
    if (kernels_[s]) STRIDER_RETURN_IF_ERROR(kernels_[s]->run(context));
  return Status::ok();
}

// A queue that cannot capture (the sim device's) keeps per-step commands; so does a failed
// capture. The CPU's "captures" by running every step in one command.
void Executor::try_capture() {
  auto graph = device_.queue(1).capture([this](const QueueContext& context) { return run_all_kernels(context); });
  if (!graph.is_ok()) return;
  captured_ = std::move(graph).value();
  for (const auto& accesses : step_accesses_)
    captured_accesses_.insert(captured_accesses_.end(), accesses.begin(), accesses.end());
}

// The steps read the inputs a run uploaded (or a binding wrote): before any run they would
// read whatever the arena held (a Gather meeting garbage indices), so timing refuses.
Status Executor::needs_inputs(std::string_view what) const {
  if (inputs_present_) return Status::ok();
  return invalid_argument(fmt::format("{} reads the inputs of the last run, and the session has not run yet", what));
}

Result<double> Executor::time_steps() {
  STRIDER_RETURN_IF_ERROR(needs_inputs("timing the steps"));
  if (captured_) return device_.queue(1).time(captured_);
  for (int queue : queue_of_step_)
    if (queue != 1) return unsupported("timing steps spread over several queues");
  return device_.queue(1).time([this](const QueueContext& context) { return run_all_kernels(context); });
}

Result<std::vector<double>> Executor::time_each_step() {
  STRIDER_RETURN_IF_ERROR(needs_inputs("timing each step"));
  std::vector<double> ms(plan_.steps.size(), 0.0);
  for (size_t s = 0; s < plan_.steps.size(); ++s) {
    Kernel* kernel = kernels_[s].get();
    if (!kernel) continue;
    STRIDER_ASSIGN_OR_RETURN(ms[s], device_.queue(queue_of_step_[s]).time_device_only([kernel](const QueueContext& context) {
      return kernel->run(context);
    }));
  }
  return ms;
}

Result<std::vector<TraceEvent>> Executor::trace(const std::vector<Tensor>& inputs) {
  std::unique_ptr<TraceClock> clock = device_.make_trace_clock();
  Tracing tracing{clock.get(), {}};
  tracing_ = &tracing;
  std::vector<Tensor> outputs(graph_.outputs().size());
  Status status = run_into(inputs, outputs, nullptr);
  tracing_ = nullptr;
  STRIDER_RETURN_IF_ERROR(status);
  STRIDER_ASSIGN_OR_RETURN(std::vector<double> stamps, clock->read(2 * tracing.commands.size()));
  return trace_events(tracing, stamps);
}

std::vector<TraceEvent> Executor::trace_events(const Tracing& tracing, const std::vector<double>& stamps) const {
  std::map<std::pair<int, uint64_t>, size_t> command_at;  // a timepoint -> the command that completes it
  std::vector<TraceEvent> events;
  for (size_t i = 0; i < tracing.commands.size(); ++i) {
    const TracedCommand& c = tracing.commands[i];
    command_at[{c.at.queue, c.at.value}] = i;
    TraceEvent e{c.label, c.at.queue, stamps[2 * i], stamps[2 * i + 1], {}};
    for (const Timepoint& w : c.waits) {  // a wait on its own queue is queue order, not a flow
      auto waited = command_at.find({w.queue, w.value});
      if (w.queue != c.at.queue && waited != command_at.end()) e.waited_for.push_back(waited->second);
    }
    events.push_back(std::move(e));
  }
  return events;
}

void Executor::describe_steps() {
  size_t steps = plan_.steps.size();
  step_accesses_.resize(steps);
  step_labels_.resize(steps);
  buffers_first_written_at_.resize(steps);
  for (size_t s = 0; s < steps; ++s) {
    const Node& node = graph_.node(plan_.steps[s].node);
    step_labels_[s] = fmt::format("{} '{}'", node.op_type, node.name);
    for (ValueId in : node.inputs)
      if (in != kNoValue) step_accesses_[s].push_back({plan_.view(in), false, graph_.value(in).name});
    for (ValueId out : node.outputs)
      if (out != kNoValue) step_accesses_[s].push_back({plan_.view(out), true, graph_.value(out).name});
  }
  // A run's inputs go up as one command and its outputs come back as one: the device
  // moves them as one transfer each (Device::upload_all), waiting once.
  std::vector<std::string> names;
  for (ValueId id : graph_.inputs()) {
    input_accesses_.push_back({plan_.view(id), true, graph_.value(id).name});
    names.push_back(fmt::format("'{}'", graph_.value(id).name));
  }
  upload_label_ = fmt::format("upload {}", fmt::join(names, ", "));
  names.clear();
  for (ValueId id : graph_.outputs()) {
    output_accesses_.push_back({plan_.view(id), false, graph_.value(id).name});
    names.push_back(fmt::format("'{}'", graph_.value(id).name));
  }
  download_label_ = fmt::format("download {}", fmt::join(names, ", "));
  for (size_t b = 0; b < plan_.buffers.size(); ++b) {
    const PlanBuffer& buffer = plan_.buffers[b];
    bool written = buffer.kind == StorageKind::kArena || buffer.kind == StorageKind::kOutput;
    if (written && buffer.first_step >= 0 && size_t(buffer.first_step) < steps)
      buffers_first_written_at_[size_t(buffer.first_step)].push_back(int(b));
  }
}

void Executor::assign_queues() {
  int device_queues = device_.num_queues() - 1;
  std::vector<int> load(size_t(device_queues) + 1, 0);
  std::vector<bool> handed_on(plan_.steps.size(), false);
  queue_of_step_.assign(plan_.steps.size(), 1);
  for (size_t s = 0; s < plan_.steps.size(); ++s) {
    if (!kernels_[s]) continue;
    int queue = 0;
    for (ValueId in : graph_.node(plan_.steps[s].node).inputs) {
      if (in == kNoValue) continue;
      NodeId writer = writer_of(graph_, plan_, in);
      if (writer == kNoNode || !kernels_[size_t(writer)]) continue;
      if (!handed_on[size_t(writer)]) {
        handed_on[size_t(writer)] = true;
        queue = queue_of_step_[size_t(writer)];
      }
      break;  // only the first producer decides
    }
    if (queue == 0) queue = int(std::min_element(load.begin() + 1, load.end()) - load.begin());
    queue_of_step_[s] = queue;
    ++load[size_t(queue)];
  }
}

Timepoint Executor::submit(int queue, std::string label, std::function<Status(const QueueContext&)> work,
                           const std::vector<MemoryAccess>& accesses) {
  std::vector<Timepoint> waits = tracker_.record(device_.queue(queue).next(), accesses);
  return submit_after(queue, std::move(label), std::move(work), accesses, std::move(waits));
}

Timepoint Executor::submit_lasting(int queue, std::string label, std::function<Status(const QueueContext&)> work,
                                   const std::vector<MemoryAccess>& accesses) {
  std::vector<Timepoint> waits = tracker_.record_lasting(device_.queue(queue).next(), accesses);
  return submit_after(queue, std::move(label), std::move(work), accesses, std::move(waits));
}

Timepoint Executor::submit_after(int queue, std::string label, std::function<Status(const QueueContext&)> work,
                                 std::span<const MemoryAccess> accesses, std::vector<Timepoint> waits) {
  Queue& q = device_.queue(queue);
  Timepoint self = q.next();
  if (options_.drop_waits)
    waits.erase(std::remove_if(waits.begin(), waits.end(), [&](const Timepoint& w) { return w.queue != queue; }),
                waits.end());
  if (sanitizer_) sanitizer_->on_submit(label, self, waits, accesses);
  if (tracing_) {
    const size_t id = tracing_->commands.size();
    tracing_->commands.push_back({label, self, waits});
    work = [clock = tracing_->clock, id, inner = std::move(work)](const QueueContext& context) {
      clock->stamp(context, 2 * id);
      Status status = inner(context);
      clock->stamp(context, 2 * id + 1);
      return status;
    };
  }
  Timepoint at = q.submit(Command{std::move(label), std::move(work), std::move(waits)});
  STRIDER_CHECK(at.queue == self.queue && at.value == self.value, "queue {} moved under the executor", queue);
  return at;
}

void Executor::submit_poison(const PlanBuffer& buffer, int queue) {
  const TensorView& root = plan_.view(buffer.root);
  TensorView bytes{root.allocation, buffer.offset, DType::kU8, {buffer.size}, {1}};
  DType dtype = root.dtype;
  std::byte* address = root.allocation->host_accessible() ? root.allocation->address() + buffer.offset : nullptr;
  int64_t size = buffer.size;
  submit(queue, fmt::format("poison '{}'", graph_.value(buffer.root).name),
         [address, size, dtype](const QueueContext&) {
           if (address) fill_poison(address, size, dtype);
           return Status::ok();
         },
         {{bytes, true, graph_.value(buffer.root).name}});
}

// Host commands reading a step's outputs into `taps` (a std::map: the element addresses the
// commands hold stay valid as later steps add entries).
void Executor::submit_taps(const PlanStep& step, std::map<ValueId, Tensor>& taps) {
  for (ValueId id : graph_.node(step.node).outputs) {
    if (id == kNoValue) continue;
    const TensorView& view = plan_.view(id);
    Tensor* tap = &taps[id];
    submit(kHostQueue, fmt::format("tap '{}'", graph_.value(id).name),
           [this, &view, tap](const QueueContext&) { return device_.download(view, tap); }, {{view, false, graph_.value(id).name}});
  }
}

Result<std::vector<Tensor>> Executor::run(const std::vector<Tensor>& inputs) { return run(inputs, nullptr); }

Result<std::vector<Tensor>> Executor::run(const std::vector<Tensor>& inputs, std::map<ValueId, Tensor>* taps) {
  std::vector<Tensor> outputs(graph_.outputs().size());
  STRIDER_RETURN_IF_ERROR(run_into(inputs, outputs, taps));
  return outputs;
}

Status Executor::run_into(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
                          std::map<ValueId, Tensor>* taps) {
  if (outputs.size() != graph_.outputs().size())
    return internal_error(fmt::format("{} output tensors for {} outputs", outputs.size(), graph_.outputs().size()));
  std::vector<Device::Upload> uploads;
  for (size_t i = 0; i < inputs.size(); ++i) uploads.push_back({&inputs[i], &plan_.view(graph_.inputs()[i])});
  if (!uploads.empty())
    submit_lasting(kHostQueue, upload_label_, [this, &uploads](const QueueContext&) { return device_.upload_all(uploads); },
                   input_accesses_);
  submit_steps(taps);
  std::vector<Device::Download> downloads;
  for (size_t i = 0; i < outputs.size(); ++i) downloads.push_back({&plan_.view(graph_.outputs()[i]), &outputs[i]});
  if (!downloads.empty())
    submit_lasting(kHostQueue, download_label_,
                   [this, &downloads](const QueueContext&) { return device_.download_all(downloads); }, output_accesses_);
  Status status = finish_run();
  if (status.is_ok()) inputs_present_ = true;
  return status;
}

Status Executor::run_in_place() {
  submit_steps(nullptr);
  Status status = finish_run();
  if (status.is_ok()) inputs_present_ = true;
  return status;
}

void Executor::submit_steps(std::map<ValueId, Tensor>* taps) {
  const bool stepwise = !captured_ || taps || tracing_;
  if (!stepwise) submit_lasting(1, "graph of every step", captured_, captured_accesses_);
  for (size_t s = 0; s < plan_.steps.size() && stepwise; ++s) {
    if (!kernels_[s]) continue;
    if (options_.poison)
      for (int b : buffers_first_written_at_[s]) submit_poison(plan_.buffers[size_t(b)], queue_of_step_[s]);
    Kernel* kernel = kernels_[s].get();
    submit_lasting(queue_of_step_[s], step_labels_[s], [kernel](const QueueContext& context) { return kernel->run(context); },
                   step_accesses_[s]);
    if (taps) submit_taps(plan_.steps[s], *taps);
  }
}

// Every queue idle, then any error a kernel can only find on the device, then the
// sanitizer's findings.
Status Executor::finish_run() {
  STRIDER_RETURN_IF_ERROR(device_.synchronize());
  for (const auto& kernel : kernels_)
    if (kernel) STRIDER_RETURN_IF_ERROR(kernel->check_completed());
  if (sanitizer_) {
    std::vector<std::string> findings = sanitizer_->take_findings();
    if (!findings.empty()) {
      std::string text;
      for (const std::string& f : findings) text += (text.empty() ? "" : "\n") + f;
      return Status(StatusCode::kHazard, text);
    }
  }
  return Status::ok();
}

}  // namespace strider
