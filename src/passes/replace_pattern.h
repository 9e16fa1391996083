// The last step every pattern-fusing pass shares: each matched pattern (its nodes, the last
// one its sink) becomes one node that takes the sink's place in the node order, so every
// value the new node reads exists before it (the passes check that), and the pattern's
// other nodes are removed. Patterns must not share nodes.
#pragma once

#include <unordered_set>
#include <vector>

#include "ir/graph.h"

namespace strider {

struct PatternReplacement {
  std::vector<NodeId> nodes;  // the pattern; nodes.back() is the sink
  Node node;                  // what the sink becomes
};

inline void replace_patterns(Graph& graph, std::vector<PatternReplacement> replacements) {
  std::unordered_set<const Node*> absorbed;
  for (PatternReplacement& r : replacements) {
    for (NodeId n : r.nodes)
      if (n != r.nodes.back()) absorbed.insert(&graph.node(n));
    graph.node(r.nodes.back()) = std::move(r.node);
  }
  graph.remove_nodes_if([&](const Node& n) { return absorbed.count(&n) != 0; });
}

}  // namespace strider
