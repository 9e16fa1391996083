#include "hal/map_group_kernel.h"

#include "ops/fused_map_group.h"

namespace strider {
namespace {

class SequentialMapGroup final : public Kernel {
 public:
  explicit SequentialMapGroup(std::vector<std::unique_ptr<Kernel>> members) : members_(std::move(members)) {}
  Status run(const QueueContext& context) override {
    for (const auto& member : members_) STRIDER_RETURN_IF_ERROR(member->run(context));
    return Status::ok();
  }
  std::string implementation() const override {
    std::string text = "group of " + std::to_string(members_.size()) + ":";
    for (size_t m = 0; m < members_.size(); ++m) text += (m ? "; " : " ") + members_[m]->implementation();
    return text;
  }
  Status check_completed() override {
    for (const auto& member : members_) STRIDER_RETURN_IF_ERROR(member->check_completed());
    return Status::ok();
  }

 private:
  std::vector<std::unique_ptr<Kernel>> members_;
};

}  // namespace

std::vector<KernelRequest> map_group_member_requests(const KernelRequest& group, const std::vector<Node>& members) {
  std::vector<KernelRequest> requests;
  size_t first = 0;  // the member's inputs follow those of the members before it
  for (size_t m = 0; m < members.size(); ++m) {
    KernelRequest r{group.graph, members[m], {}, {group.outputs[m]}};
    r.inputs.assign(group.inputs.begin() + long(first), group.inputs.begin() + long(first + members[m].inputs.size()));
    first += members[m].inputs.size();
    requests.push_back(std::move(r));
  }
  return requests;
}

Result<std::unique_ptr<Kernel>> make_sequential_map_group(const KernelRequest& group, const MemberKernelMaker& make_member) {
  STRIDER_ASSIGN_OR_RETURN(std::vector<Node> members, map_group_members(group.node));
  std::vector<std::unique_ptr<Kernel>> kernels;
  for (const KernelRequest& member : map_group_member_requests(group, members)) {
    STRIDER_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> kernel, make_member(member));
    kernels.push_back(std::move(kernel));
  }
  return std::unique_ptr<Kernel>(new SequentialMapGroup(std::move(kernels)));
}

}  // namespace strider
