// FusedMapGroup: the members' encoding on the node and the group's shape function
// (registered in op_registry.cc under the strider domain).
#include "ops/fused_map_group.h"

#include <fmt/format.h>

#include "ops/op_registry.h"

namespace strider {
namespace {

// The attribute names ops/fused_elementwise.h writes a program under.
constexpr std::string_view kProgramAttributes[] = {"ops", "operands", "alphas", "betas", "expression"};

std::string member_prefix(size_t m) { return fmt::format("m{}.", m); }

}  // namespace

Result<Node> map_group_member(const Node& group, size_t m) {
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> counts, group.attributes.require_ints("member_inputs"));
  if (counts.empty() || counts.size() > size_t(kMaxMapGroupMembers) || counts.size() != group.outputs.size())
    return invalid_model(fmt::format("node '{}': a map group of {} members and {} outputs", group.name, counts.size(),
                                     group.outputs.size()));
  if (m >= counts.size()) return invalid_model(fmt::format("node '{}' has no member {}", group.name, m));
  size_t first = 0, total = 0;
  for (size_t k = 0; k < counts.size(); ++k) {
    if (counts[k] < 1 || counts[k] > kMaxFusedInputs)
      return invalid_model(fmt::format("node '{}': member {} reads {} inputs", group.name, k, counts[k]));
    if (k < m) first += size_t(counts[k]);
    total += size_t(counts[k]);
  }
  if (total != group.inputs.size())
    return invalid_model(
        fmt::format("node '{}': members read {} inputs, the group has {}", group.name, total, group.inputs.size()));
  Node member;
  member.name = fmt::format("{}#{}", group.name, m);
  member.op_type = std::string(kFusedElementwiseOp);
  member.domain = std::string(kStriderDomain);
  member.opset = group.opset;
  member.expanded_from = group.expanded_from;
  member.inputs.assign(group.inputs.begin() + long(first), group.inputs.begin() + long(first + size_t(counts[m])));
  member.outputs = {group.outputs[m]};
  const std::string prefix = member_prefix(m);
  for (std::string_view name : kProgramAttributes)
    if (const Attribute* a = group.attributes.find(prefix + std::string(name))) member.attributes.set(std::string(name), *a);
  STRIDER_RETURN_IF_ERROR(read_fused_program(member).status());
  return member;
}

Result<std::vector<Node>> map_group_members(const Node& group) {
  std::vector<Node> members;
  for (size_t m = 0; m < group.outputs.size(); ++m) {
    STRIDER_ASSIGN_OR_RETURN(Node member, map_group_member(group, m));
    members.push_back(std::move(member));
  }
  if (members.empty()) return invalid_model(fmt::format("node '{}': a map group without members", group.name));
  return members;
}

Node make_map_group(const std::vector<const Node*>& members, std::string name) {
  Node group;
  group.name = std::move(name);
  group.op_type = std::string(kFusedMapGroupOp);
  group.domain = std::string(kStriderDomain);
  group.opset = members.front()->opset;
  group.expanded_from = members.front()->expanded_from;
  std::vector<int64_t> counts;
  for (size_t m = 0; m < members.size(); ++m) {
    const Node& member = *members[m];
    group.inputs.insert(group.inputs.end(), member.inputs.begin(), member.inputs.end());
    group.outputs.push_back(member.outputs[0]);
    counts.push_back(int64_t(member.inputs.size()));
    for (std::string_view attribute : kProgramAttributes)
      if (const Attribute* a = member.attributes.find(std::string(attribute)))
        group.attributes.set(member_prefix(m) + std::string(attribute), *a);
  }
  group.attributes.set_ints("member_inputs", std::move(counts));
  return group;
}

namespace {

// Each output is its member's inputs broadcast together, of their one dtype.
Status infer_map_group(InferContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> counts, ctx.node().attributes.require_ints("member_inputs"));
  STRIDER_RETURN_IF_ERROR(map_group_members(ctx.node()).status());
  size_t first = 0;
  for (size_t m = 0; m < counts.size(); first += size_t(counts[m]), ++m) {
    Shape shape = ctx.input_shape(first);
    for (size_t i = first + 1; i < first + size_t(counts[m]); ++i) {
      Shape next;
      if (!broadcast_shapes(shape, ctx.input_shape(i), &next))
        return ctx.error("member {}: input shapes {} and {} do not broadcast", m, shape_to_string(shape),
                         shape_to_string(ctx.input_shape(i)));
      if (ctx.input_dtype(i) != ctx.input_dtype(first)) return ctx.error("member {}: inputs have different dtypes", m);
      shape = std::move(next);
    }
    ctx.set_output(m, ctx.input_dtype(first), std::move(shape));
  }
  return Status::ok();
}

}  // namespace

OpSchema fused_map_group_schema() { return {kFusedMapGroupOp, infer_map_group, {}, {}, {}}; }

}  // namespace strider
