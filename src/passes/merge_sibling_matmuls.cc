#include "passes/merge_sibling_matmuls.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <unordered_set>

#include "passes/node_inserter.h"

namespace strider {

Result<std::shared_ptr<const Tensor>> MergedWeights::joined(const std::vector<std::shared_ptr<const Tensor>>& parts,
                                                            const std::vector<std::shared_ptr<const Tensor>>& origins,
                                                            int64_t rows, Shape shape) {
  if (parts.empty() || parts.size() != origins.size() || rows <= 0)
    return internal_error("joined: no parts, no rows, or parts and origins differ");
  std::vector<const Tensor*> key;
  for (const auto& o : origins) key.push_back(o.get());
  std::lock_guard lock(mutex_);
  Entry& entry = entries_[{parts[0]->dtype(), key}];
  bool same = entry.origins.size() == origins.size();
  for (size_t k = 0; same && k < origins.size(); ++k) same = entry.origins[k].lock() == origins[k];  // not a freed address reused
  if (same)
    if (std::shared_ptr<const Tensor> kept = entry.joined.lock()) return kept;
  Tensor out = Tensor::for_overwrite(parts[0]->dtype(), std::move(shape));
  const size_t element = parts[0]->byte_size() / size_t(std::max<int64_t>(parts[0]->num_elements(), 1));
  size_t column = 0, total_columns = 0;
  for (const auto& p : parts) total_columns += size_t(p->num_elements() / rows);
  if (out.byte_size() != total_columns * size_t(rows) * element) return internal_error("joined: shape and parts differ");
  for (const auto& p : parts) {
    const size_t width = size_t(p->num_elements() / rows);
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(out.bytes() + (size_t(r) * total_columns + column) * element, p->bytes() + size_t(r) * width * element,
                  width * element);
    column += width;
  }
  auto made = std::make_shared<const Tensor>(std::move(out));
  entry.origins.assign(origins.begin(), origins.end());
  entry.joined = made;
  ++joins_;
  std::erase_if(entries_, [](const auto& e) {
    return std::any_of(e.second.origins.begin(), e.second.origins.end(), [](const auto& o) { return o.expired(); });
  });
  return made;
}

int64_t MergedWeights::joins() const {
  std::lock_guard lock(mutex_);
  return joins_;
}

namespace {

// One MatMul of a group: x @ weight, then (if `bias` is set) + bias in `bias_add`;
// `result` is what the rest of the graph reads (the sum, or the product).
struct Sibling {
  NodeId matmul = kNoNode, bias_add = kNoNode;
  ValueId weight = kNoValue, bias = kNoValue, result = kNoValue;
  int64_t width = 0;  // N
};

struct SiblingGroup {
  ValueId x = kNoValue;
  std::vector<Sibling> members;  // in node order
};

class SiblingFinder {
 public:
  explicit SiblingFinder(const Graph& g) : g_(g), consumers_(g.consumers()), outputs_(g.outputs().begin(), g.outputs().end()) {}

  // Every group of two or more siblings, biased and unbiased ones apart.
  std::vector<SiblingGroup> groups() const {
    std::vector<SiblingGroup> found;
    for (ValueId x = 0; x < g_.num_values(); ++x) {
      if (g_.value(x).is_constant() || consumers_[size_t(x)].size() < 2) continue;
      SiblingGroup biased{x, {}}, plain{x, {}};
      for (NodeId reader : consumers_[size_t(x)])
        if (std::optional<Sibling> s = sibling(x, reader)) (s->bias != kNoValue ? biased : plain).members.push_back(*s);
      for (SiblingGroup* group : {&biased, &plain})
        if (group->members.size() >= 2) found.push_back(std::move(*group));
    }
    return found;
  }

 private:
  // `reader` as x @ W with W a constant [K, N] of x's floating dtype.
  std::optional<Sibling> sibling(ValueId x, NodeId reader) const {
    const Node& n = g_.node(reader);
    if (n.op_type != "MatMul" || !n.in_default_domain() || n.inputs.size() != 2 || n.outputs.size() != 1 ||
        n.inputs[0] != x || n.inputs[1] == x)
      return std::nullopt;
    const Value& xv = g_.value(x);
    const Value& w = g_.value(n.inputs[1]);
    const Value& y = g_.value(n.outputs[0]);
    const bool floating = xv.dtype == DType::kF32 || xv.dtype == DType::kBF16 || xv.dtype == DType::kF16;
    if (!floating || !w.is_constant() || w.dtype != xv.dtype || w.constant->dtype() != xv.dtype || w.shape.size() != 2 ||
        xv.shape.empty() || xv.shape.back() <= 0 || w.shape[0] != xv.shape.back() || y.dtype != xv.dtype || y.shape.empty() ||
        y.shape.back() != w.shape[1] || w.shape[1] <= 0)
      return std::nullopt;
    Sibling s{reader, kNoNode, n.inputs[1], kNoValue, n.outputs[0], w.shape[1]};
    add_bias(s);
    return s;
  }

  // The Add of a constant [.., N] (1 in every other dim) that alone reads the product.
  void add_bias(Sibling& s) const {
    const ValueId product = s.result;
    if (outputs_.count(product) || consumers_[size_t(product)].size() != 1) return;
    const NodeId add_id = consumers_[size_t(product)][0];
    const Node& add = g_.node(add_id);
    if (add.op_type != "Add" || !add.in_default_domain() || add.inputs.size() != 2 || add.outputs.size() != 1 ||
        add.inputs[0] == add.inputs[1])
      return;
    const ValueId bias = add.inputs[0] == product ? add.inputs[1] : add.inputs[0];
    const Value& b = g_.value(bias);
    const Value& y = g_.value(product);
    if (!b.is_constant() || b.dtype != y.dtype || b.constant->dtype() != y.dtype || b.shape.empty() ||
        b.shape.size() > y.shape.size() || b.shape.back() != s.width || b.constant->num_elements() != s.width ||
        g_.value(add.outputs[0]).shape != y.shape || g_.value(add.outputs[0]).dtype != y.dtype)
      return;
    s.bias_add = add_id;
    s.bias = bias;
    s.result = add.outputs[0];
  }

  const Graph& g_;
  std::vector<std::vector<NodeId>> consumers_;
  std::unordered_set<ValueId> outputs_;
};

// Writes the merged product, its bias and the Split at `position`.
class MergedWriter {
 public:
  MergedWriter(Graph& g, const Node& first, NodeId position, MergedWeights* cache, const ConstantOrigin& origin)
      : g_(g), insert_(g, first, position, "siblings"), opset_(first.opset), cache_(cache), origin_(origin) {}

  Status write(const SiblingGroup& group) {
    int64_t total = 0;
    std::vector<int64_t> widths;
    for (const Sibling& s : group.members) {
      total += s.width;
      widths.push_back(s.width);
    }
    const Value& x = g_.value(group.x);
    const DType dtype = x.dtype;
    const int64_t depth = x.shape.back();
    STRIDER_ASSIGN_OR_RETURN(ValueId weight, joined_constant(group, &Sibling::weight, depth, {depth, total}));
    Shape product_shape = g_.value(group.members[0].result).shape;
    product_shape.back() = total;
    STRIDER_ASSIGN_OR_RETURN(ValueId joined, insert_.node("MatMul", {group.x, weight}, dtype, product_shape));
    if (group.members[0].bias != kNoValue) {
      STRIDER_ASSIGN_OR_RETURN(ValueId bias, joined_constant(group, &Sibling::bias, 1, {total}));
      STRIDER_ASSIGN_OR_RETURN(joined, insert_.node("Add", {joined, bias}, dtype, product_shape));
    }
    return split(group, joined, widths);
  }

 private:
  Status split(const SiblingGroup& group, ValueId joined, const std::vector<int64_t>& widths) {
    AttributeMap attributes;
    attributes.set_int("axis", -1);
    std::vector<ValueId> inputs = {joined};
    if (opset_ >= 13) {
      STRIDER_ASSIGN_OR_RETURN(ValueId sizes, insert_.constant(std::make_shared<const Tensor>(Tensor::from_values<int64_t>(
                                                  DType::kI64, {int64_t(widths.size())}, widths))));
      inputs.push_back(sizes);
    } else {
      attributes.set_ints("split", widths);
    }
    std::vector<ValueId> parts;
    for (const Sibling& s : group.members) parts.push_back(s.result);
    return insert_.node_into("Split", std::move(inputs), std::move(parts), std::move(attributes));
  }

  // The members' weights (or biases) side by side, as a new constant of shape `shape`.
  Result<ValueId> joined_constant(const SiblingGroup& group, ValueId Sibling::*part, int64_t rows, Shape shape) {
    std::vector<std::shared_ptr<const Tensor>> parts, origins;
    for (const Sibling& s : group.members) {
      parts.push_back(g_.value(s.*part).constant);
      origins.push_back(origin_ ? origin_(parts.back()) : parts.back());
      if (!origins.back()) origins.back() = parts.back();
    }
    MergedWeights uncached;
    MergedWeights& cache = cache_ ? *cache_ : uncached;
    STRIDER_ASSIGN_OR_RETURN(std::shared_ptr<const Tensor> tensor, cache.joined(parts, origins, rows, std::move(shape)));
    return insert_.constant(std::move(tensor));
  }

  Graph& g_;
  rewriting::NodeInserter insert_;
  int opset_;
  MergedWeights* cache_;
  const ConstantOrigin& origin_;
};

// The parts' constants that nothing reads any more let go of their tensors, so that a
// graph holds its weights once (a bf16 session's lowered parts would otherwise live on
// beside the joined copy).
void release_unread(Graph& graph, const SiblingGroup& group) {
  std::unordered_set<ValueId> parts;
  for (const Sibling& s : group.members) parts.insert({s.weight, s.bias});
  for (NodeId id = 0; id < graph.num_nodes(); ++id)
    for (ValueId v : graph.node(id).inputs) parts.erase(v);
  for (ValueId v : graph.outputs()) parts.erase(v);
  for (ValueId v : parts)
    if (v != kNoValue) graph.value(v).constant.reset();
}

}  // namespace

Result<int> merge_sibling_matmuls(Graph& graph, MergedWeights* cache, const ConstantOrigin& origin) {
  int merged = 0;
  // One group at a time, found again after each rewrite (node ids move): a model has a
  // few groups a layer, and finding them is one pass over the graph.
  for (;;) {
    const std::vector<SiblingGroup> groups = SiblingFinder(graph).groups();
    if (groups.empty()) return merged;
    const SiblingGroup& group = groups[0];
    const NodeId position = group.members[0].matmul;  // the group's first node: x and the weights exist there
    const Node first = graph.node(position);
    std::unordered_set<const Node*> removed;
    for (const Sibling& s : group.members) {
      removed.insert(&graph.node(s.matmul));
      if (s.bias_add != kNoNode) removed.insert(&graph.node(s.bias_add));
    }
    graph.remove_nodes_if([&](const Node& n) { return removed.count(&n) > 0; });
    STRIDER_RETURN_IF_ERROR(MergedWriter(graph, first, position, cache, origin).write(group));
    release_unread(graph, group);
    ++merged;
  }
}

}  // namespace strider
