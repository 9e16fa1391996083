#include "exec/sanitizer.h"

#include <fmt/format.h>

#include <algorithm>

namespace strider {

Sanitizer::Sanitizer(int num_queues)
    : num_queues_(num_queues),
      clocks_(size_t(num_queues), VectorClock(size_t(num_queues), 0)),
      snapshots_(size_t(num_queues)) {}

std::string Sanitizer::describe(const Entry& earlier, const MemoryAccess& later, const std::string& later_label,
                                Timepoint later_at) const {
  ByteRange a = footprint(earlier.access.view), b = footprint(later.view);
  const Allocation& allocation = *later.view.allocation;
  std::string where = fmt::format("{} {} [{:#x}, {:#x})", allocation.device_name(), allocation.label(),
                                  std::max(a.begin, b.begin), std::min(a.end, b.end));
  std::string first = fmt::format("{} (queue {})", earlier.label, earlier.at.queue);
  std::string second = fmt::format("{} (queue {})", later_label, later_at.queue);
  if (!earlier.access.write)
    return fmt::format("hazard: WAR on {}: {} writes value '{}' while {} may still read value '{}'; no wait orders them",
                       where, second, later.value, first, earlier.access.value);
  if (!later.write)
    return fmt::format("hazard: RAW on {}: {} reads value '{}' that {} may not have written yet ('{}'); no wait orders them",
                       where, second, later.value, first, earlier.access.value);
  return fmt::format("hazard: WAW on {}: {} writes value '{}' while {} may still write value '{}'; no wait orders them",
                     where, second, later.value, first, earlier.access.value);
}

void Sanitizer::on_submit(const std::string& label, Timepoint self, std::span<const Timepoint> waits,
                          std::span<const MemoryAccess> accesses) {
  VectorClock clock = clocks_[size_t(self.queue)];
  for (const Timepoint& w : waits) {
    auto& snapshots = snapshots_[size_t(w.queue)];
    // The clock of the latest command at or before the waited timepoint.
    auto it = snapshots.upper_bound(w.value);
    if (it != snapshots.begin()) {
      const VectorClock& other = std::prev(it)->second;
      for (size_t q = 0; q < clock.size(); ++q) clock[q] = std::max(clock[q], other[q]);
    }
    clock[size_t(w.queue)] = std::max(clock[size_t(w.queue)], w.value);
  }
  clock[size_t(self.queue)] = self.value;
  for (const MemoryAccess& access : accesses) {
    auto found = history_.find(access.view.allocation);
    if (found == history_.end()) continue;
    for (const Entry& e : found->second) {
      bool conflict = e.access.write || access.write;
      bool ordered = e.at.queue == self.queue || clock[size_t(e.at.queue)] >= e.at.value;
      if (conflict && !ordered && may_overlap(e.access.view, access.view))
        findings_.push_back(describe(e, access, label, self));
    }
  }
  clocks_[size_t(self.queue)] = clock;
  snapshots_[size_t(self.queue)][self.value] = clock;
  for (const MemoryAccess& access : accesses) history_[access.view.allocation].push_back({access, label, self});
  if (++submits_ % 64 != 0) return;
  // Forget what every queue is ordered after: it can race with nothing that comes later.
  auto settled = [&](Timepoint t) {
    return std::all_of(clocks_.begin(), clocks_.end(), [&](const VectorClock& c) { return c[size_t(t.queue)] >= t.value; });
  };
  for (auto& [allocation, entries] : history_)
    entries.erase(std::remove_if(entries.begin(), entries.end(), [&](const Entry& e) { return settled(e.at); }),
                  entries.end());
  for (int q = 0; q < num_queues_; ++q) {
    auto& snapshots = snapshots_[size_t(q)];
    while (snapshots.size() > 1 && settled({q, snapshots.begin()->first})) snapshots.erase(snapshots.begin());
  }
}

std::vector<std::string> Sanitizer::take_findings() {
  std::vector<std::string> findings = std::move(findings_);
  findings_.clear();
  return findings;
}

}  // namespace strider
