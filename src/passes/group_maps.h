// group_small_maps: runs independent small FusedElementwise nodes as one FusedMapGroup
// (ops/fused_map_group.h), one kernel launch where there were several, for devices on which
// a small map costs its launch rather than its bytes (Device::max_grouped_map_elements).
//
// Walking the nodes in order, a group collects FusedElementwise nodes of one dtype whose
// outputs have at most `max_elements` elements, until a node reads one of the collected
// outputs, kMaxMapGroupMembers are collected, or a node of another dtype would join. The
// group takes the place of its last member: every member's inputs are defined before that
// member, so before it, and nothing up to it reads a member's output, so delaying the
// earlier members to it changes no value anything reads. Groups of one are left alone.
//
// Runs last among the fusions (after every pass that folds a FusedElementwise into a
// convolution's or a product's epilogue) and after shape inference: it moves typed values
// and writes no new one.
#pragma once

#include <cstdint>

#include "ir/graph.h"
#include "strider/status.h"

namespace strider {

// Returns how many groups were formed (0 when max_elements is 0).
Result<int> group_small_maps(Graph& graph, int64_t max_elements);

}  // namespace strider
