#include "hal/cpu/host_evaluator.h"

#include <fmt/format.h>

#include "hal/cpu/cpu_kernels.h"

namespace strider::cpu {
namespace {

// A host allocation over a tensor's own bytes. Kernels only read their inputs, so a
// constant is wrapped in place rather than copied (a folded Transpose of a large weight
// would otherwise hold it twice).
// An empty tensor has no bytes and a null address; kernels still form (never dereference)
// addresses from a view's base, which on null is undefined behaviour, so it gets a
// dummy block instead.
std::unique_ptr<Allocation> wrap(const Tensor& tensor, const std::string& label) {
  alignas(64) static std::byte empty_block[64];
  std::byte* address = tensor.byte_size() ? const_cast<std::byte*>(tensor.bytes()) : empty_block;
  return std::make_unique<Allocation>(0, label, "cpu", address, int64_t(tensor.byte_size()), 1,
                                      StorageMode::kHost, true);
}

}  // namespace

Result<std::vector<Tensor>> evaluate_on_host(const Graph& graph, const Node& node) {
  std::vector<Tensor> outputs;
  std::vector<std::unique_ptr<Allocation>> allocations;
  KernelRequest request{graph, node, {}, {}};
  for (ValueId id : node.inputs) {
    if (id == kNoValue) {
      request.inputs.emplace_back();
      continue;
    }
    const Value& v = graph.value(id);
    if (!v.is_constant()) return internal_error(fmt::format("folding needs constant '{}'", v.name));
    allocations.push_back(wrap(*v.constant, v.name));
    STRIDER_ASSIGN_OR_RETURN(TensorView view, make_dense_view(*allocations.back(), 0, v.dtype, v.shape, v.name));
    request.inputs.push_back(std::move(view));
  }
  outputs.reserve(node.outputs.size());
  for (ValueId id : node.outputs) {
    if (id == kNoValue) {
      outputs.emplace_back();
      request.outputs.emplace_back();
      continue;
    }
    const Value& v = graph.value(id);
    outputs.emplace_back(v.dtype, v.shape);
    allocations.push_back(wrap(outputs.back(), v.name));
    STRIDER_ASSIGN_OR_RETURN(TensorView view, make_dense_view(*allocations.back(), 0, v.dtype, v.shape, v.name));
    request.outputs.push_back(std::move(view));
  }
  STRIDER_RETURN_IF_ERROR(check_kernel_views(request));
  if (all_outputs_empty(request)) return outputs;
  STRIDER_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> kernel, create_kernel(request));
  STRIDER_RETURN_IF_ERROR(kernel->run(QueueContext{}));
  return outputs;
}

}  // namespace strider::cpu
