// A device's kernel table: {op_type, create} entries sorted by op type, found per node.
// The CPU and CUDA devices each register their kernel families into one; only nodes of the
// default ONNX domain and strider's own have kernels.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "strider/status.h"

namespace strider {

template <typename Entry>
class KernelTable {
 public:
  explicit KernelTable(std::vector<Entry> entries) : entries_(std::move(entries)) {
    std::sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) { return a.op_type < b.op_type; });
  }

  const Entry* find(std::string_view op_type) const {
    auto it = std::lower_bound(entries_.begin(), entries_.end(), op_type,
                               [](const Entry& e, std::string_view op) { return e.op_type < op; });
    return it != entries_.end() && it->op_type == op_type ? &*it : nullptr;
  }

  // The entry for `node`, or UNSUPPORTED naming the device ("CPU", "CUDA") and the op.
  Result<const Entry*> entry_for(const Node& node, std::string_view device) const {
    bool known_domain = node.domain.empty() || node.domain == "strider";
    const Entry* entry = known_domain ? find(node.op_type) : nullptr;
    if (entry == nullptr) return unsupported(fmt::format("no {} kernel for {}", device, node.op_type));
    return entry;
  }

 private:
  std::vector<Entry> entries_;
};

// A factory's result with the node named in its error.
template <typename T>
Result<T> for_node(Result<T> made, const Node& node) {
  if (!made.is_ok()) return made.status().with_context(fmt::format("node '{}' ({})", node.name, node.op_type));
  return made;
}

}  // namespace strider
