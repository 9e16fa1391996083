// StagedRun: a session whose graph is split at a node that cannot be planned with the rest.
//
// Why. A plan is static: every value's shape is known when the session is made. An op
// whose output shape depends on its input values (NonZero, Compress, Unique,
// NonMaxSuppression: ops/data_dependent.h) breaks that for everything after it. Rather
// than making every session dynamic, or planning such outputs at an upper bound that every
// later kernel would have to clip, the graph is split at the first such node:
//
//   before  the nodes ahead of it: one ordinary Session, planned at creation;
//   node    evaluated on the host on the run's real values, by constant folding a graph
//           of that one node (the same code that folds it when its inputs are constants);
//   after   the nodes behind it: an ordinary Session per set of shapes it sees (and per
//           value of any of its inputs that decides shapes), made on first use and kept,
//           least recently used out, like DynamicSession's cache. It may split again.
//
// Values cross the split as host tensors: `before`'s outputs are every value it computes
// that the node or `after` reads or that is a graph output; constants folded before the
// split stay constants in `after` (so torch's shape arithmetic still folds there).
// Everything a plan promises holds inside each part; the cost is a synchronization and
// a round trip through host memory at each split, once per run.
//
// The same split serves a node the session's device declines (Device::declines: CUDA has
// no kernel for its op or its dtypes): the node runs on the host with the CPU kernels, the
// rest on the device. A per-node host fallback inside one plan would need host and device
// memory spaces in the plan; the split keeps every plan single-device.
//
// Thread safety: as Session (run() calls take turns: the caller holds Session::Impl's lock).
#pragma once

#include <list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "exec/session_internal.h"

namespace strider {

class StagedRun {
 public:
  // `graph`: inferred and folded at least up to node `split` (infer_and_fold's split_at),
  // no node before it removed. `why`: the reason it is split there, for inspect.
  // `resources` are shared with the parts' sessions.
  static Result<std::unique_ptr<StagedRun>> create(const Graph& graph, NodeId split, std::string why,
                                                   const SessionOptions& options,
                                                   const PlanOptions& plan_options,
                                                   std::shared_ptr<SessionResources> resources);

  // Inputs in graph input order (already checked by the caller); outputs in graph output order.
  Result<std::vector<Tensor>> run(const std::vector<Tensor>& inputs);

  // One line per part, for `strider inspect`: what runs before, at and after the split.
  std::vector<std::string> describe() const;
  // The plan of the part before the split (null when there is none).
  const Session* before() const { return before_session_.get(); }

 private:
  struct After {
    std::vector<Shape> shapes;                 // per after-input
    std::vector<std::vector<std::byte>> keys;  // the values of its shape-deciding inputs
    std::unique_ptr<Session> session;
  };
  using Env = std::map<std::string, Tensor>;

  Status run_node(Env& env) const;
  Result<Session*> after_session(const Env& env);
  Result<std::vector<Tensor>> gather(const Env& env, const std::vector<std::string>& names) const;

  SessionOptions options_;
  PlanOptions plan_options_;
  std::shared_ptr<SessionResources> resources_;
  std::vector<std::string> input_names_, output_names_;
  std::map<std::string, std::shared_ptr<const Tensor>> constants_;  // graph outputs and node inputs that are constants
  std::unique_ptr<Session> before_session_;
  std::vector<std::string> before_inputs_, before_outputs_;
  Graph node_graph_;  // the split node alone; its inputs are graph inputs (or constants)
  std::string node_description_, why_;
  Graph after_graph_;  // empty of nodes when nothing follows the split
  std::vector<std::string> after_inputs_, after_shape_inputs_;
  std::list<After> afters_;  // most recently used first
};

}  // namespace strider
