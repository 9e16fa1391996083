#include "passes/group_maps.h"

#include <algorithm>
#include <limits>
#include <unordered_set>

#include "base/shape.h"
#include "ops/fused_map_group.h"
#include "ops/op_registry.h"

namespace strider {
namespace {

bool groupable(const Graph& g, const Node& n, int64_t max_elements) {
  if (n.domain != kStriderDomain || n.op_type != kFusedElementwiseOp || n.outputs.size() != 1 || n.inputs.empty())
    return false;
  const Value& out = g.value(n.outputs[0]);
  const int64_t elements = num_elements(out.shape);
  const bool floating = out.dtype == DType::kF32 || out.dtype == DType::kBF16 || out.dtype == DType::kF16;
  return floating && elements > 0 && elements <= max_elements;
}

// A node that may run later than it stands, after a group it reads from: a view or a
// Concat (which the planner turns into its parts written in place). So Llama's first
// rotary halves' Concat does not end the group before the second tensor's halves.
bool delayable(const Node& n) {
  if (n.in_default_domain() && n.op_type == "Concat") return true;
  const OpSchema* schema = find_op_schema(n.domain, n.op_type);
  return schema != nullptr && schema->traits.view != ViewKind::kNone;
}

// A group of two or more members, and the nodes between its first and last member that
// read a member's output (or a delayed node's): they move to just after the group.
struct Group {
  std::vector<NodeId> members, delayed;
};

class GroupFinder {
 public:
  GroupFinder(const Graph& g, int64_t max_elements) : g_(g), max_elements_(max_elements) {}

  std::vector<Group> run() {
    for (NodeId id = 0; id < g_.num_nodes(); ++id) visit(id);
    close();
    return groups_;
  }

 private:
  static constexpr size_t kMaxDelayed = 8;

  void visit(NodeId id) {
    const Node& n = g_.node(id);
    if (!open_.members.empty() && reads_group(n)) {
      if (delayable(n) && open_.delayed.size() < kMaxDelayed) {
        open_.delayed.push_back(id);
        for (ValueId v : n.outputs) produced_.insert(v);
        return;
      }
      close();
    }
    if (!groupable(g_, n, max_elements_)) return;
    const DType dtype = g_.value(n.outputs[0]).dtype;
    if (!open_.members.empty() && (open_.members.size() == size_t(kMaxMapGroupMembers) || dtype != dtype_)) close();
    dtype_ = dtype;
    open_.members.push_back(id);
    produced_.insert(n.outputs[0]);
  }
  bool reads_group(const Node& n) const {
    for (ValueId v : n.inputs)
      if (v != kNoValue && produced_.count(v)) return true;
    return false;
  }
  void close() {
    // Delayed nodes after the last member stay where they are.
    std::erase_if(open_.delayed, [&](NodeId d) { return d > open_.members.back(); });
    if (open_.members.size() >= 2) groups_.push_back(std::move(open_));
    open_ = {};
    produced_.clear();
  }

  const Graph& g_;
  const int64_t max_elements_;
  std::vector<Group> groups_;
  Group open_;
  DType dtype_ = DType::kF32;
  std::unordered_set<ValueId> produced_;  // the open group's members' and delayed nodes' outputs
};

}  // namespace

Result<int> group_small_maps(Graph& graph, int64_t max_elements) {
  if (max_elements <= 0) return 0;
  const std::vector<Group> groups = GroupFinder(graph, max_elements).run();
  if (groups.empty()) return 0;
  std::vector<Node> group_nodes;
  std::vector<std::vector<Node>> delayed_nodes;
  std::unordered_set<const Node*> moved;
  for (const Group& group : groups) {
    std::vector<const Node*> members;
    for (NodeId id : group.members) members.push_back(&graph.node(id));
    group_nodes.push_back(make_map_group(members, graph.node(group.members.front()).name + ".group"));
    moved.insert(members.begin(), members.end());
    delayed_nodes.emplace_back();
    for (NodeId id : group.delayed) {
      delayed_nodes.back().push_back(graph.node(id));
      moved.insert(&graph.node(id));
    }
  }
  graph.remove_nodes_if([&](const Node& n) { return moved.count(&n) != 0; });
  // Group k, then the nodes it delays, go where its last member was: after the nodes before
  // it that stay, and after the groups (and their delayed nodes) before it.
  int64_t removed = 0, inserted = 0;
  for (size_t k = 0; k < groups.size(); ++k) {
    removed += int64_t(groups[k].members.size() + groups[k].delayed.size());
    NodeId position = NodeId(groups[k].members.back() + 1 - removed + inserted);
    STRIDER_RETURN_IF_ERROR(graph.insert_node(position++, std::move(group_nodes[k])).status());
    for (Node& n : delayed_nodes[k]) STRIDER_RETURN_IF_ERROR(graph.insert_node(position++, std::move(n)).status());
    inserted += int64_t(1 + delayed_nodes[k].size());
  }
  return int(groups.size());
}

}  // namespace strider
