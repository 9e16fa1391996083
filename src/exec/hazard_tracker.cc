#include "exec/hazard_tracker.h"

#include <algorithm>

#include "base/check.h"

namespace strider {

VectorClock join_clocks(const VectorClock& own, std::span<const VectorClock> waited, Timepoint self) {
  VectorClock clock = own;
  for (const VectorClock& other : waited)
    for (size_t q = 0; q < clock.size(); ++q) clock[q] = std::max(clock[q], other[q]);
  clock[size_t(self.queue)] = self.value;
  return clock;
}

HazardTracker::HazardTracker(int num_queues, std::vector<bool> used)
    : num_queues_(num_queues),
      clocks_(size_t(num_queues), VectorClock(size_t(num_queues), 0)),
      snapshots_(size_t(num_queues)),
      used_(used.empty() ? std::vector<bool>(size_t(num_queues), true) : std::move(used)) {
  STRIDER_CHECK(used_.size() == size_t(num_queues), "{} used flags for {} queues", used_.size(), num_queues);
}

void HazardTracker::join_clock_of(Timepoint t, VectorClock& clock) const {
  const auto& snapshots = snapshots_[size_t(t.queue)];
  auto it = snapshots.find(t.value);
  STRIDER_CHECK(it != snapshots.end(), "no clock for queue {} value {}", t.queue, t.value);
  for (size_t q = 0; q < clock.size(); ++q) clock[q] = std::max(clock[q], it->second[q]);
}

std::vector<Timepoint> HazardTracker::record(Timepoint self, std::span<const MemoryAccess> accesses) {
  auto copies = std::make_shared<const std::vector<MemoryAccess>>(accesses.begin(), accesses.end());
  return record_entries(self, *copies, copies);
}

std::vector<Timepoint> HazardTracker::record_lasting(Timepoint self, std::span<const MemoryAccess> accesses) {
  return record_entries(self, accesses, nullptr);
}

std::vector<Timepoint> HazardTracker::record_entries(Timepoint self, std::span<const MemoryAccess> accesses,
                                                     const std::shared_ptr<const std::vector<MemoryAccess>>& owner) {
  STRIDER_CHECK(self.queue >= 0 && self.queue < num_queues_ && used_[size_t(self.queue)], "queue {}", self.queue);
  const VectorClock& ordered = clocks_[size_t(self.queue)];
  // The latest conflicting timepoint per other queue that the queue is not yet ordered after.
  std::vector<uint64_t> needed(size_t(num_queues_), 0);
  for (const MemoryAccess& access : accesses) {
    auto found = history_.find(access.view.allocation);
    if (found == history_.end()) continue;
    for (int q = 0; q < num_queues_; ++q) {
      if (q == self.queue) continue;  // a queue runs its own commands in order
      const std::vector<Entry>& entries = found->second[size_t(q)];
      for (auto e = entries.rbegin(); e != entries.rend(); ++e) {  // newest first
        if (e->at.value <= std::max(ordered[size_t(q)], needed[size_t(q)])) break;
        if ((e->access->write || access.write) && may_overlap(e->access->view, access.view)) {
          needed[size_t(q)] = e->at.value;
          break;
        }
      }
    }
  }
  std::vector<Timepoint> candidates;
  for (int q = 0; q < num_queues_; ++q)
    if (needed[size_t(q)] > 0) candidates.push_back({q, needed[size_t(q)]});
  // Drop a wait that another one implies (the other command was itself ordered after it).
  std::vector<Timepoint> waits;
  for (const Timepoint& c : candidates) {
    bool implied = false;
    for (const Timepoint& d : candidates) {
      if (d.queue == c.queue) continue;
      VectorClock clock(size_t(num_queues_), 0);
      join_clock_of(d, clock);
      implied |= clock[size_t(c.queue)] >= c.value;
    }
    if (!implied) waits.push_back(c);
  }
  VectorClock clock = ordered;
  for (const Timepoint& w : waits) join_clock_of(w, clock);
  clock[size_t(self.queue)] = self.value;
  clocks_[size_t(self.queue)] = clock;
  snapshots_[size_t(self.queue)][self.value] = clock;
  for (const MemoryAccess& access : accesses) {
    auto& per_queue = history_[access.view.allocation];
    per_queue.resize(size_t(num_queues_));
    per_queue[size_t(self.queue)].push_back({&access, self, owner});
  }
  entries_since_prune_ += accesses.size();
  if (++records_ % 64 == 0 || entries_since_prune_ >= 1024) prune();
  return waits;
}

// An access, or a clock snapshot, that every queue is ordered after can conflict with no
// future command in a way that needs a wait.
void HazardTracker::prune() {
  auto everyone_after = [&](Timepoint t) {
    for (size_t q = 0; q < clocks_.size(); ++q)
      if (used_[q] && clocks_[q][size_t(t.queue)] < t.value) return false;
    return true;
  };
  entries_since_prune_ = 0;
  for (auto it = history_.begin(); it != history_.end();) {
    bool empty = true;
    for (auto& entries : it->second) {
      // Timepoints rise along the list: the ones every queue is ordered after lead it.
      auto first_kept = std::find_if(entries.begin(), entries.end(), [&](const Entry& e) { return !everyone_after(e.at); });
      entries.erase(entries.begin(), first_kept);
      empty &= entries.empty();
    }
    it = empty ? history_.erase(it) : std::next(it);
  }
  for (int q = 0; q < num_queues_; ++q) {
    auto& snapshots = snapshots_[size_t(q)];
    // Keep the queue's latest clock: its next command starts from it.
    while (snapshots.size() > 1 && everyone_after({q, snapshots.begin()->first})) snapshots.erase(snapshots.begin());
  }
}

size_t HazardTracker::history_size() const {
  size_t n = 0;
  for (const auto& [allocation, per_queue] : history_)
    for (const auto& entries : per_queue) n += entries.size();
  return n;
}

}  // namespace strider
