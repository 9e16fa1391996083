// Session::Impl and the library's way into it (src/exec: session.cc, bound_run.cc, and the
// tools through session_internal.h's functions). Not part of the public API.
#pragma once

#include <list>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "exec/executor.h"
#include "exec/staged_session.h"
#include "exec/session_internal.h"
#include "strider/io_binding.h"

namespace strider {

// The library's way into a Session (inspect_session, run_with_taps, time_device_steps):
// Session::Impl is not part of the public API.
struct SessionAccess {
  static Session::Impl& impl(Session& s) { return *s.impl_; }
  static const Session::Impl& impl(const Session& s) { return *s.impl_; }
  static std::unique_ptr<Session> make(std::unique_ptr<Session::Impl> impl) {
    return std::unique_ptr<Session>(new Session(std::move(impl)));
  }
};

// A node the device had no kernel for, and the device's reason (the session then splits
// the graph there and runs it on the host: staged_session.h).
struct RefusedNode {
  std::string node, why;
};

struct Session::Impl {
  SessionOptions options;
  SessionDebugOptions debug;
  // What this session shares with others made for the same model (DynamicSession's cached
  // shapes): the device, the device copies of constants, the parent memory budget.
  std::shared_ptr<SessionResources> resources;
  // The session's own host allocations (constants, folded constants), in a child of the
  // shared budget that gives them back when the session goes.
  std::shared_ptr<MemoryBudget> budget;
  std::shared_ptr<Device> device;
  std::vector<ValueInfo> inputs, outputs;   // as the caller sees them
  Graph graph;                              // as planned (Materialize nodes included)
  Plan plan;                                // data: views on placeholders (what inspect prints)
  BoundPlan bound;                          // the plan on real memory (what runs)
  std::vector<std::unique_ptr<Kernel>> kernels;  // per plan step; null where nothing runs
  std::unique_ptr<Executor> executor;
  // Set instead of the plan, kernels and executor when the graph is split at a node whose
  // output shape depends on values (exec/staged_session.h).
  std::unique_ptr<StagedRun> staged;
  std::mutex running;  // run() is not reentrant: concurrent calls take turns

  Status plan_and_create_kernels(const Graph& prepared, PlanOptions plan_options, RefusedNode* first_unsupported);
  Result<std::vector<Tensor>> check_inputs(const std::vector<Tensor>& given) const;
  Status check_outputs(const std::vector<Tensor>& given) const;
  // Runs into `results`: with `into_caller`, the caller's tensors (checked), written in
  // place; otherwise filled with new tensors.
  Status run_into(const std::vector<Tensor>& given, std::vector<Tensor>& results, bool into_caller);
  Status run_split(const std::vector<Tensor>& inputs, std::vector<Tensor>& results, bool into_caller);

  // Plans bound to a caller's memory (IoBinding), by the addresses they were bound to, each
  // with its kernels and executor; most recently used first (bound_run.cc).
  // A value the caller's memory cannot stand for directly (the session computes it in
  // bf16, or plans it channels-last): it keeps its place in the session's memory, and a
  // Cast kernel copies it between there and the caller's memory on the device, before
  // (inputs) or after (outputs) the steps.
  struct StagedCopy {
    Graph graph;                          // the one Cast node the kernel was made for
    std::unique_ptr<Allocation> caller;   // over the caller's bytes
    std::unique_ptr<Kernel> kernel;
    bool before_steps = true;
    std::string label;
  };
  struct BoundVariant {
    std::vector<const void*> addresses;  // inputs, then outputs, in graph order
    BoundPlan bound;
    std::vector<std::unique_ptr<Kernel>> kernels;
    std::unique_ptr<Executor> executor;
    std::vector<StagedCopy> staged;
  };
  std::list<BoundVariant> variants;
  int64_t variants_made = 0;
  // Memory of the outputs bound to the device, by output name: a few allocations each,
  // reused once the caller dropped them (io_binding.h).
  std::map<std::string, std::vector<std::shared_ptr<OutputMemory>>> output_pool;
  Status run_bound(IoBinding& binding);
  Result<MemoryRef> pooled_output(const std::string& name, const TensorView& planned, int ordinal);
  Result<BoundVariant*> variant_for(const std::vector<const void*>& addresses, const std::vector<bool>& staged);
  ExecutorOptions executor_options() const;
};

struct KernelAttempt {
  std::vector<std::unique_ptr<Kernel>> kernels;
  std::set<std::string> refused_nodes;  // nodes that refused non-packed operands, to plan densely
};

// Creates every step's kernel, in one sweep: every node that refuses its non-packed views
// is collected (so one more plan serves them all), and unsupported nodes are listed
// together in one error.
// `first_unsupported`, when given, receives the first node the device had no kernel for.
Result<KernelAttempt> create_kernels(const Graph& graph, const Plan& plan, Device& device,
                                     RefusedNode* first_unsupported = nullptr);

}  // namespace strider
