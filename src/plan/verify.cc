#include "plan/verify.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace strider {
namespace {

std::string describe(const Graph& graph, const Plan& plan, ValueId v) {
  ByteRange r = footprint(plan.view(v));
  return fmt::format("'{}' {} bytes [{:#x}, {:#x})", graph.value(v).name, plan.view(v).allocation->label(), r.begin,
                     r.end);
}

// The plan's alias_of links as a forest, numbered depth-first: whether one value aliases
// another (is its ancestor or descendant) in O(1), and the values in an order that puts
// every value before the values aliasing it. Walking alias chains for every pair had made
// verification cubic in the length of a run of in-place steps (an unrolled LSTM's state).
class AliasForest {
 public:
  explicit AliasForest(const Plan& plan) : enter_(plan.values.size(), -1), leave_(plan.values.size(), -1) {
    std::vector<std::vector<ValueId>> children(plan.values.size());
    std::vector<ValueId> roots;
    for (ValueId v = 0; v < ValueId(plan.values.size()); ++v) {
      if (!plan.values[size_t(v)]) continue;
      const ValueId of = plan.values[size_t(v)]->alias_of;
      (of == kNoValue ? roots : children[size_t(of)]).push_back(v);
    }
    int clock = 0;
    std::vector<std::pair<ValueId, size_t>> stack;  // value, next child to visit
    for (ValueId root : roots) {
      stack.push_back({root, 0});
      enter_[size_t(root)] = clock++;
      preorder_.push_back(root);
      while (!stack.empty()) {
        auto& [v, next] = stack.back();
        if (next < children[size_t(v)].size()) {
          const ValueId child = children[size_t(v)][next++];
          enter_[size_t(child)] = clock++;
          preorder_.push_back(child);
          stack.push_back({child, 0});
        } else {
          leave_[size_t(v)] = clock++;
          stack.pop_back();
        }
      }
    }
  }
  // True if a and b are one value, or one aliases the other through alias_of links.
  bool related(ValueId a, ValueId b) const { return ancestor(a, b) || ancestor(b, a); }
  // Every value with a plan entry, each before the values that alias it.
  const std::vector<ValueId>& preorder() const { return preorder_; }

 private:
  bool ancestor(ValueId a, ValueId b) const {
    return enter_[size_t(a)] >= 0 && enter_[size_t(b)] >= 0 && enter_[size_t(a)] <= enter_[size_t(b)] &&
           leave_[size_t(b)] <= leave_[size_t(a)];
  }
  std::vector<int> enter_, leave_;
  std::vector<ValueId> preorder_;
};

Status check_views_and_alignment(const Graph& graph, const Plan& plan) {
  for (ValueId v = 0; v < ValueId(plan.values.size()); ++v) {
    if (!plan.values[size_t(v)]) continue;
    const TensorView& view = plan.view(v);
    auto again = make_view(*view.allocation, view.byte_offset, view.dtype, view.sizes, view.strides,
                           fmt::format("value '{}'", graph.value(v).name));
    if (!again.is_ok()) return internal_error("plan: " + again.status().message());
  }
  for (const PlanBuffer& b : plan.buffers)
    if (b.offset % 64 != 0)
      return internal_error(fmt::format("plan: buffer of '{}' at offset {} is not 64-byte aligned",
                                        graph.value(b.root).name, b.offset));
  return Status::ok();
}

struct Lifetime {
  int first = 0, last = -1;
};

// Each buffer's steps recomputed from the plan's own steps, apart from the packer's
// figures: from the first step that writes a value in it (inputs and constants exist
// before step 0) to the last step that reads one (graph outputs: past the last step).
// The packer's numbers are what is being checked, so they are not trusted here.
std::vector<Lifetime> buffer_lifetimes(const Graph& graph, const Plan& plan) {
  int steps = int(plan.steps.size());
  std::vector<Lifetime> life(plan.buffers.size());
  for (size_t b = 0; b < plan.buffers.size(); ++b) {
    StorageKind kind = plan.buffers[b].kind;
    life[b] = kind == StorageKind::kArena || kind == StorageKind::kOutput ? Lifetime{steps, -1} : Lifetime{-1, -1};
  }
  auto buffer_of = [&](ValueId v) { return plan.values[size_t(v)] ? plan.values[size_t(v)]->buffer : -1; };
  for (int i = 0; i < steps; ++i) {
    const Node& node = graph.node(plan.steps[size_t(i)].node);
    for (ValueId out : node.outputs)
      if (int b = out == kNoValue ? -1 : buffer_of(out); b >= 0) {
        if (plan.buffers[size_t(b)].kind == StorageKind::kArena || plan.buffers[size_t(b)].kind == StorageKind::kOutput)
          life[size_t(b)].first = std::min(life[size_t(b)].first, i);
        life[size_t(b)].last = std::max(life[size_t(b)].last, i);
      }
    for (ValueId in : node.inputs)
      if (int b = in == kNoValue ? -1 : buffer_of(in); b >= 0) life[size_t(b)].last = std::max(life[size_t(b)].last, i);
  }
  for (ValueId out : graph.outputs())
    if (int b = buffer_of(out); b >= 0) life[size_t(b)].last = steps;
  return life;
}

// Two buffers of one kind, live together by `life`, that share a byte: an error naming
// them.
Status overlap_error(const Graph& graph, const Plan& plan, const std::vector<Lifetime>& life, size_t i, size_t j) {
  return internal_error(fmt::format("plan: buffers of {} and {} overlap while both live (steps {}-{} and {}-{})",
                                    describe(graph, plan, plan.buffers[i].root), describe(graph, plan, plan.buffers[j].root),
                                    life[i].first, life[i].last, life[j].first, life[j].last));
}

bool share_a_byte(const PlanBuffer& a, const PlanBuffer& b) {
  return a.kind == b.kind && a.size > 0 && b.size > 0 && a.offset < b.offset + b.size && b.offset < a.offset + a.size;
}

// No two buffers of one kind that are live together share a byte. A sweep over the steps
// (O(B log B); comparing every pair took 0.5 s of a 9610-buffer plan): buffers enter at
// their first step and leave after their last, and the live ones of a kind, which must be
// disjoint, are kept ordered by offset, so a new buffer need only be compared with its
// neighbours. Lifetimes with last < first (a buffer nothing writes) are compared with
// every buffer instead, by the definition: live together when neither ends before the
// other begins.
Status check_live_buffers_disjoint(const Graph& graph, const Plan& plan, const std::vector<Lifetime>& life) {
  const size_t n = plan.buffers.size();
  std::vector<size_t> by_first, by_last;
  for (size_t i = 0; i < n; ++i) {
    if (plan.buffers[i].size <= 0) continue;
    if (life[i].last < life[i].first) {
      for (size_t j = 0; j < n; ++j)
        if (j != i && share_a_byte(plan.buffers[i], plan.buffers[j]) && life[i].first <= life[j].last &&
            life[j].first <= life[i].last)
          return overlap_error(graph, plan, life, std::min(i, j), std::max(i, j));
      continue;
    }
    by_first.push_back(i);
    by_last.push_back(i);
  }
  std::sort(by_first.begin(), by_first.end(), [&](size_t a, size_t b) { return life[a].first < life[b].first; });
  std::sort(by_last.begin(), by_last.end(), [&](size_t a, size_t b) { return life[a].last < life[b].last; });
  std::map<std::pair<StorageKind, int64_t>, size_t> live;  // (kind, offset) -> buffer
  size_t leaving = 0;
  for (size_t i : by_first) {
    for (; leaving < by_last.size() && life[by_last[leaving]].last < life[i].first; ++leaving) {
      const PlanBuffer& gone = plan.buffers[by_last[leaving]];
      auto it = live.find({gone.kind, gone.offset});
      if (it != live.end() && it->second == by_last[leaving]) live.erase(it);
    }
    const PlanBuffer& b = plan.buffers[i];
    auto next = live.lower_bound({b.kind, b.offset});
    if (next != live.end() && share_a_byte(b, plan.buffers[next->second]))
      return overlap_error(graph, plan, life, std::min(i, next->second), std::max(i, next->second));
    if (next != live.begin() && share_a_byte(b, plan.buffers[std::prev(next)->second]))
      return overlap_error(graph, plan, life, std::min(i, std::prev(next)->second), std::max(i, std::prev(next)->second));
    live[{b.kind, b.offset}] = i;
  }
  return Status::ok();
}

// The lifetimes the packer used must cover the real ones, and two arena buffers live at
// the same time (by the real lifetimes) must not share a byte.
Status check_buffers_disjoint(const Graph& graph, const Plan& plan) {
  std::vector<Lifetime> life = buffer_lifetimes(graph, plan);
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    const PlanBuffer& b = plan.buffers[i];
    // Only the arena is packed by lifetimes; constants, inputs and outputs live throughout.
    if (b.kind != StorageKind::kArena || life[i].last < life[i].first) continue;
    if (b.first_step > life[i].first || b.last_step < life[i].last)
      return internal_error(fmt::format("plan: buffer of {} was packed as live in steps {}-{} but is used in steps {}-{}",
                                        describe(graph, plan, b.root), b.first_step, b.last_step, life[i].first,
                                        life[i].last));
  }
  return check_live_buffers_disjoint(graph, plan, life);
}

// Each value's steps from its producer to the last read of it or of any value aliasing it.
std::vector<std::pair<int, int>> value_lifetimes(const Graph& graph, const Plan& plan, const AliasForest& forest) {
  std::vector<std::pair<int, int>> life(plan.values.size(), {0, -1});
  std::vector<int> last_read(plan.values.size(), -1);  // of the value itself, then of its aliasing tree
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Node& node = graph.node(plan.steps[i].node);
    for (ValueId out : node.outputs)
      if (out != kNoValue) life[size_t(out)] = {int(i), int(i)};
    for (ValueId in : node.inputs)
      if (in != kNoValue) last_read[size_t(in)] = std::max(last_read[size_t(in)], int(i));
  }
  for (ValueId out : graph.outputs()) last_read[size_t(out)] = int(plan.steps.size());
  const std::vector<ValueId>& order = forest.preorder();
  for (auto v = order.rbegin(); v != order.rend(); ++v) {  // each value after those aliasing it
    life[size_t(*v)].second = std::max(life[size_t(*v)].second, last_read[size_t(*v)]);
    if (ValueId of = plan.values[size_t(*v)]->alias_of; of != kNoValue)
      last_read[size_t(of)] = std::max(last_read[size_t(of)], last_read[size_t(*v)]);
  }
  return life;
}

// Inside one buffer, values written by different steps (not views) that are live at the
// same time must not share a byte unless one aliases the other.
Status check_writers_disjoint(const Graph& graph, const Plan& plan) {
  std::vector<std::vector<ValueId>> written(plan.buffers.size());
  for (ValueId v = 0; v < ValueId(plan.values.size()); ++v) {
    const auto& p = plan.values[size_t(v)];
    if (p && p->role != ValueRole::kView && graph.value(v).producer != kNoNode) written[size_t(p->buffer)].push_back(v);
  }
  const AliasForest forest(plan);
  std::vector<std::pair<int, int>> life = value_lifetimes(graph, plan, forest);
  auto live_together = [&](ValueId a, ValueId b) {
    return life[size_t(a)].first <= life[size_t(b)].second && life[size_t(b)].first <= life[size_t(a)].second;
  };
  for (const auto& values : written)
    for (size_t i = 0; i < values.size(); ++i)
      for (size_t j = i + 1; j < values.size(); ++j) {
        ValueId a = values[i], b = values[j];
        if (forest.related(a, b) || !live_together(a, b) || !may_overlap(plan.view(a), plan.view(b))) continue;
        return internal_error(fmt::format("plan: {} and {} are written by different steps, live together and overlap",
                                          describe(graph, plan, a), describe(graph, plan, b)));
      }
  return Status::ok();
}

}  // namespace

Status verify_plan(const Graph& graph, const Plan& plan) {
  STRIDER_RETURN_IF_ERROR(check_views_and_alignment(graph, plan));
  STRIDER_RETURN_IF_ERROR(check_buffers_disjoint(graph, plan));
  return check_writers_disjoint(graph, plan);
}

}  // namespace strider
