// Buffer lifetimes and best-fit arena packing.
//
// A buffer is live from the first step that writes any value in it to the last step that
// reads any value in it (its views and concat parts included). Buffers are placed largest
// first; each goes into the smallest gap, among the buffers already placed whose lifetimes
// overlap its own, that fits it, or above them all. Sizes and offsets are multiples of 64
// bytes. Reuse is therefore never limited to equal sizes: a dead buffer's bytes can hold
// any mix of later, smaller ones.
#include <algorithm>
#include <map>

#include "plan/planner_state.h"

namespace strider::plan_internal {

void compute_lifetimes(PlannerState& s) {
  int steps = s.graph.num_nodes();
  for (PlanBuffer& b : s.buffers) {
    bool arena = b.kind == StorageKind::kArena;
    b.first_step = arena ? steps : -1;  // inputs and constants exist before the first step
    b.last_step = b.kind == StorageKind::kOutput ? steps : -1;
  }
  for (NodeId id = 0; id < steps; ++id) {
    const Node& node = s.graph.node(id);
    for (ValueId out : node.outputs) {
      if (out == kNoValue) continue;
      PlanBuffer& b = s.buffers[size_t(s.buffer_of[size_t(out)])];
      if (b.kind == StorageKind::kArena || b.kind == StorageKind::kOutput) b.first_step = std::min(b.first_step, id);
      b.last_step = std::max(b.last_step, id);  // a value no one reads still needs its bytes
    }
    for (ValueId in : node.inputs)
      if (in != kNoValue) {
        PlanBuffer& b = s.buffers[size_t(s.buffer_of[size_t(in)])];
        b.last_step = std::max(b.last_step, id);
      }
  }
  for (PlanBuffer& b : s.buffers)
    if (b.kind == StorageKind::kOutput) b.first_step = std::min(b.first_step, steps);
}

namespace {

// The offset of the smallest gap that holds `size` bytes among `taken` ([begin, end)
// ranges), or the end of the highest one.
int64_t best_fit(std::vector<std::pair<int64_t, int64_t>> taken, int64_t size) {
  std::sort(taken.begin(), taken.end());
  int64_t best = -1, best_gap = 0, cursor = 0;
  for (const auto& [begin, end] : taken) {
    int64_t gap = begin - cursor;
    if (gap >= size && (best < 0 || gap < best_gap)) {
      best = cursor;
      best_gap = gap;
    }
    cursor = std::max(cursor, end);
  }
  return best >= 0 ? best : cursor;
}

// The placed buffers whose lifetimes overlap a query's: those alive at its first step
// (a segment tree over the steps lists each buffer at the O(log S) nodes that tile its
// lifetime, and the leaf's path to the root holds exactly the buffers alive there) and
// those that begin after it, up to its last step (ordered by first step). Scanning every
// placed buffer instead made packing O(B^2): 14% of an unrolled 1024-step LSTM's session.
class PlacedLifetimes {
 public:
  explicit PlacedLifetimes(int steps) : steps_(std::max(steps, 1)), nodes_(2 * size_t(steps_)) {}
  void add(size_t buffer, int first, int last) {
    if (first > last) return;  // never live: overlaps nothing
    for (int lo = first + steps_, hi = last + steps_ + 1; lo < hi; lo /= 2, hi /= 2) {
      if (lo & 1) nodes_[size_t(lo++)].push_back(buffer);
      if (hi & 1) nodes_[size_t(--hi)].push_back(buffer);
    }
    by_first_.emplace(first, buffer);
  }
  template <typename Visit>
  void for_each_overlapping(int first, int last, Visit&& visit) const {
    if (first > last) return;
    for (int node = first + steps_; node >= 1; node /= 2)
      for (size_t buffer : nodes_[size_t(node)]) visit(buffer);
    for (auto it = by_first_.upper_bound(first); it != by_first_.end() && it->first <= last; ++it) visit(it->second);
  }

 private:
  int steps_;
  std::vector<std::vector<size_t>> nodes_;
  std::multimap<int, size_t> by_first_;
};

}  // namespace

int64_t pack_arena(std::vector<PlanBuffer>& buffers, bool reuse) {
  std::vector<size_t> order;
  int steps = 0;
  for (size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i].kind == StorageKind::kArena) {
      order.push_back(i);
      steps = std::max({steps, buffers[i].first_step + 1, buffers[i].last_step + 1});
    }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (buffers[a].size != buffers[b].size) return buffers[a].size > buffers[b].size;
    return buffers[a].first_step < buffers[b].first_step;
  });
  int64_t arena = 0;
  std::vector<size_t> placed;
  PlacedLifetimes lifetimes(steps);
  for (size_t i : order) {
    PlanBuffer& b = buffers[i];
    std::vector<std::pair<int64_t, int64_t>> taken;
    auto take = [&](size_t j) { taken.emplace_back(buffers[j].offset, buffers[j].offset + align_up(buffers[j].size)); };
    if (reuse) {
      lifetimes.for_each_overlapping(b.first_step, b.last_step, take);
    } else {
      for (size_t j : placed) take(j);
    }
    b.offset = best_fit(std::move(taken), align_up(b.size));
    arena = std::max(arena, b.offset + align_up(b.size));
    placed.push_back(i);
    lifetimes.add(i, b.first_step, b.last_step);
  }
  return arena;
}

int64_t live_bytes_lower_bound(const std::vector<PlanBuffer>& buffers, int num_steps) {
  // The bytes live at each step as a difference array: a buffer adds its size at its
  // first step and takes it away after its last (summing every buffer at every step was
  // 0.1 s of an unrolled 1024-step LSTM's session).
  if (num_steps <= 0) return 0;
  std::vector<int64_t> change(size_t(num_steps) + 1, 0);
  for (const PlanBuffer& b : buffers) {
    const int first = std::max(b.first_step, 0), last = std::min(b.last_step, num_steps - 1);
    if (b.kind != StorageKind::kArena || first > last) continue;
    change[size_t(first)] += align_up(b.size);
    change[size_t(last) + 1] -= align_up(b.size);
  }
  int64_t peak = 0, live = 0;
  for (int step = 0; step < num_steps; ++step) peak = std::max(peak, live += change[size_t(step)]);
  return peak;
}

}  // namespace strider::plan_internal
