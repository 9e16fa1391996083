// Sanitizer (`--sanitize`, STRIDER_SANITIZE=1): checks, independently of the hazard
// tracker, that every pair of conflicting accesses is ordered by the waits that were
// actually submitted (after --debug-drop-waits, if set), on any device.
//
// It keeps its own vector clocks: a command is ordered after everything its queue ran
// before it and everything the commands it waits for were ordered after. Two accesses to
// overlapping elements of one allocation, at least one a write, from commands neither of
// which is ordered after the other, are a finding:
//   hazard: WAR on cpu arena [0x4000, 0x4800): Concat '/Concat' (queue 1) writes while
//   Conv '/m.0/cv1/conv/Conv' (queue 2) may still read value '/Split_output_1'; no wait orders them
#pragma once

#include <map>
#include <span>
#include <string>
#include <vector>

#include "exec/hazard_tracker.h"

namespace strider {

class Sanitizer {
 public:
  explicit Sanitizer(int num_queues);

  // A command was submitted as `self` with exactly `waits`.
  void on_submit(const std::string& label, Timepoint self, std::span<const Timepoint> waits,
                 std::span<const MemoryAccess> accesses);
  // Findings so far, each one line; taking them clears the list.
  std::vector<std::string> take_findings();

 private:
  struct Entry {
    MemoryAccess access;
    std::string label;
    Timepoint at;
  };
  std::string describe(const Entry& earlier, const MemoryAccess& later, const std::string& later_label,
                       Timepoint later_at) const;

  int num_queues_;
  std::vector<VectorClock> clocks_;                         // per queue, after its latest command
  std::vector<std::map<uint64_t, VectorClock>> snapshots_;  // per queue: value -> clock
  std::map<const Allocation*, std::vector<Entry>> history_;
  std::vector<std::string> findings_;
  uint64_t submits_ = 0;
};

}  // namespace strider
