// HazardTracker: turns the memory each command declares it reads and writes into the
// fewest waits that order it after every conflicting earlier command.
//
// Conflicts are RAW (read after write), WAR (write after read) and WAW, between accesses
// to the same allocation whose elements may overlap (may_overlap: slices of one concat that
// interleave in memory but share no element do not conflict). Identity is the allocation
// plus the view, never a raw pointer, so a view with a storage offset is tracked like its
// root (docs/MEMORY_MODEL.md rules 1 and 2). Arena reuse needs no special case: a new value in reused bytes
// is a write that overlaps the old value's reads.
//
// Waits are minimal: none for an earlier command on the same in-order queue, at most one
// per other queue (the latest needed), and none that an earlier wait already implies. The
// tracker knows what is implied from vector clocks: each queue's clock says, for every
// queue, up to which timepoint its latest command is ordered after. History that every
// queue is ordered after is dropped, so memory stays bounded over many runs.
#pragma once

#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "hal/queue.h"
#include "memory/tensor_view.h"

namespace strider {

struct MemoryAccess {
  TensorView view;
  bool write = false;
  std::string value;  // the value's name, for reports
};

using VectorClock = std::vector<uint64_t>;

class HazardTracker {
 public:
  // `used`: the queues that will record commands (empty: all). History is dropped once every
  // used queue is ordered after it; a queue that never records would otherwise hold every
  // access of every run (a second device queue over a chain of steps: 15 KB a run).
  // Recording on a queue not in `used` is a programming error.
  explicit HazardTracker(int num_queues, std::vector<bool> used = {});

  // The waits a command about to complete `self` needs for `accesses`; records them
  // (copies of them: the caller's may go once this returns).
  std::vector<Timepoint> record(Timepoint self, std::span<const MemoryAccess> accesses);
  // The same for accesses that outlive the tracker (an executor's per-step lists, the same
  // every run): recorded by address, not copied. A run of a few hundred steps records a
  // few hundred accesses; copying each (a view's sizes, strides and name on the heap) cost
  // more than a small model's kernels.
  std::vector<Timepoint> record_lasting(Timepoint self, std::span<const MemoryAccess> accesses);

  // Accesses still remembered (for tests of pruning).
  size_t history_size() const;

 private:
  struct Entry {
    const MemoryAccess* access;
    Timepoint at;
    std::shared_ptr<const std::vector<MemoryAccess>> owner;  // the copies `access` points into; null when lasting
  };
  std::vector<Timepoint> record_entries(Timepoint self, std::span<const MemoryAccess> accesses,
                                        const std::shared_ptr<const std::vector<MemoryAccess>>& owner);
  // Joins the clock of timepoint `t` into `clock`.
  void join_clock_of(Timepoint t, VectorClock& clock) const;
  void prune();

  int num_queues_;
  std::vector<VectorClock> clocks_;                     // per queue, after its latest command
  std::vector<std::map<uint64_t, VectorClock>> snapshots_;  // per queue: value -> clock
  // Per allocation, per queue: the accesses in submission order, so timepoints rise along
  // each list. record() walks a list newest first and stops at the first entry the queue
  // is already ordered after, and never walks the submitting queue's own list: a CUDA graph
  // submits hundreds of accesses a run, all on one queue.
  std::map<const Allocation*, std::vector<std::vector<Entry>>> history_;
  std::vector<bool> used_;
  uint64_t records_ = 0;
  size_t entries_since_prune_ = 0;
};

// The vector clock of a command on `self.queue` that waits for `waits`, given each queue's
// clock so far. Shared by the tracker and the sanitizer.
VectorClock join_clocks(const VectorClock& own, std::span<const VectorClock> waited, Timepoint self);

}  // namespace strider
