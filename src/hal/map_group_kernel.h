// A FusedMapGroup (ops/fused_map_group.h) as its members' own kernels run one after another
// in the group's step: what the CPU runs (its maps cost no launch), and what a GPU runs
// where its one-launch kernel does not apply. The members' requests are the group's own
// views, split by member, so each member kernel sees what its FusedElementwise would have.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "hal/kernel.h"
#include "ir/graph.h"

namespace strider {

// Each member's request: its node (`members`, from map_group_members, keeps them) and the
// group's views of its inputs and of its output.
std::vector<KernelRequest> map_group_member_requests(const KernelRequest& group, const std::vector<Node>& members);

using MemberKernelMaker = std::function<Result<std::unique_ptr<Kernel>>(const KernelRequest&)>;
// Every member's kernel from `make_member`, run in member order.
Result<std::unique_ptr<Kernel>> make_sequential_map_group(const KernelRequest& group, const MemberKernelMaker& make_member);

}  // namespace strider
