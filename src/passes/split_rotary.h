// split_rotate_half: the rotary position embedding (Su et al. 2021) as torch exports
// Llama's apply_rotary_pos_emb, over the last axis of x (2h wide):
//   x * cos + Concat(Neg(Slice(x, h:2h)), Slice(x, 0:h)) * sin        (rotate_half)
// runs a Neg, a Concat that copies the other half next to it, and then the map over x and
// the rotated copy. Half by half it is elementwise:
//   first  = x1 * cos1 - x2 * sin1             second = x2 * cos2 + x1 * sin2
// (the first exactly x1 * cos1 + Neg(x2) * sin1: negation commutes with rounding) where x1, x2, cos1, cos2, sin1, sin2 are Slices of the last axis (views; cos and sin of
// width 1 broadcast as they are). The pass writes it so, the halves Concat'ed into the
// pattern's output: fuse_elementwise makes each half one map, and the planner places both
// in the Concat's halves, so nothing is copied. The same operations on the same operands,
// so the result is bit-identical.
//
// A pattern is rewritten only when its intermediates (the Neg, the Concat, both products)
// are read by the next node of the pattern alone, every value has x's floating dtype, and
// the sum has x's shape. Runs after shape inference (it types the values it writes),
// before fuse_elementwise.
#pragma once

#include "ir/graph.h"
#include "strider/status.h"

namespace strider {

// Returns how many rotary embeddings were split into halves.
Result<int> split_rotate_half(Graph& graph);

}  // namespace strider
