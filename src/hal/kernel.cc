#include "hal/kernel.h"

#include <fmt/format.h>

namespace strider {
namespace {

Status check_operands(const KernelRequest& request, const std::vector<ValueId>& ids,
                      const std::vector<TensorView>& views, const char* kind) {
  const Node& node = request.node;
  if (views.size() != ids.size())
    return internal_error(fmt::format("{}: {} {} views for {} {}s", describe_node(node), views.size(), kind,
                                      ids.size(), kind));
  for (size_t i = 0; i < ids.size(); ++i) {
    bool present = ids[i] != kNoValue;
    if (present != (views[i].allocation != nullptr))
      return internal_error(fmt::format("{}: {} {} is {} but its view {}", describe_node(node), kind, i,
                                        present ? "present" : "omitted", present ? "has no memory" : "has memory"));
    if (!present) continue;
    const Value& value = request.graph.value(ids[i]);
    std::string what = fmt::format("{}: {} {} ('{}')", describe_node(node), kind, i, value.name);
    if (views[i].dtype != value.dtype || views[i].sizes != value.shape)
      return internal_error(fmt::format("{}: view {}{} for a value of {}{}", what, dtype_name(views[i].dtype),
                                        shape_to_string(views[i].sizes), dtype_name(value.dtype),
                                        shape_to_string(value.shape)));
    Status inside = check_inside_allocation(views[i], what);
    if (!inside.is_ok()) return internal_error(inside.message());
  }
  return Status::ok();
}

}  // namespace

bool all_outputs_empty(const KernelRequest& request) {
  if (request.outputs.empty()) return false;
  for (const TensorView& v : request.outputs)
    if (v.allocation && v.num_elements() > 0) return false;
  return true;
}

Status check_kernel_views(const KernelRequest& request) {
  STRIDER_RETURN_IF_ERROR(check_operands(request, request.node.inputs, request.inputs, "input"));
  return check_operands(request, request.node.outputs, request.outputs, "output");
}

}  // namespace strider
