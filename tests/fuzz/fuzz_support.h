// What the fuzz targets share: running a model's bytes through everything a stranger's
// file reaches (import, signatures and shape inference with folding, planning, kernel
// creation, a run on seeded inputs, the float64 reference that `strider check` runs), and
// the rule every failure must meet.
//
// A failure must be a Status: one line, no control bytes, and never INTERNAL (an internal
// error reachable from a file is a check strider is missing, so the target aborts on it and
// the fuzzer reports it like a crash) nor HAZARD (some inputs run on the sim device with two
// queues and the sanitizer: an unordered access is an ordering bug). Crashes, sanitizer reports, hangs (-timeout) and
// allocations beyond the budget (-malloc_limit_mb) are found by libFuzzer itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "strider/status.h"

namespace strider::fuzz {

// Budget for one input: what a fuzzed model may make strider allocate.
inline constexpr int64_t kFuzzMemoryBytes = int64_t(64) << 20;

// Aborts when `status` breaks the rule above.
void require_clean(const Status& status);

// Imports `bytes` as a model and, while it holds, plans, runs and evaluates it.
void exercise_model(std::span<const std::byte> bytes);

}  // namespace strider::fuzz
