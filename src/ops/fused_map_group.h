// FusedMapGroup (domain "strider"): independent FusedElementwise nodes that one kernel
// launch runs together (passes/group_maps.h). On a GPU a small map costs its launch, not
// its bytes: Llama's rotary embedding is four maps of 16K elements a layer (each half of
// q and of k), a third of the decoder's steps at batch 1.
//
// Member m is a whole FusedElementwise: its inputs are the group's inputs
// [first_m, first_m + count_m) in order, its output is the group's output m, and its
// program is stored under the attribute names of ops/fused_elementwise.h prefixed with
// "m<m>." (member_node rebuilds the FusedElementwise node). `member_inputs` holds
// count_0, count_1, ...
//
// Members are independent: no member reads another's output (the pass forms groups only
// so), and each output is written at its own indices only, so the members may run in any
// order or interleaved. Element i of member m's output depends only on element i of its
// broadcast inputs, as in FusedElementwise; the group as a whole is not elementwise (its
// outputs have different shapes), so it has no in-place trait: no output shares bytes with
// an input.
#pragma once

#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "ops/fused_elementwise.h"
#include "strider/status.h"

namespace strider {

inline constexpr std::string_view kFusedMapGroupOp = "FusedMapGroup";
// At most this many members: the GPU kernel's parameters hold every member's indexing.
inline constexpr int kMaxMapGroupMembers = 4;
// The most output elements of a member the CUDA device groups (Device::
// max_grouped_map_elements): Llama's rotary halves at batch 1 (16K elements) are far
// below it, at batch 32 (512K) above, where each map is long enough that its own launch's
// vector or row mode beats the group kernel's one element a thread. The sim device groups
// as CUDA does, so that CI's sim runs check the graphs the GPU runs.
inline constexpr int64_t kGroupedMapElements = int64_t(1) << 18;

// Member `m` of `group` as the FusedElementwise node it was (its inputs, output and
// program); INVALID_MODEL when the group's attributes are malformed.
Result<Node> map_group_member(const Node& group, size_t m);
// Every member, checked (programs, input counts adding up to the group's, one output each).
Result<std::vector<Node>> map_group_members(const Node& group);
// The group node of `members` (FusedElementwise nodes), inputs and outputs in order.
Node make_map_group(const std::vector<const Node*>& members, std::string name);

}  // namespace strider
