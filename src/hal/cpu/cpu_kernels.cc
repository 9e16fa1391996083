#include "hal/cpu/cpu_kernels.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "hal/cpu/dtype_dispatch.h"

namespace strider::cpu {
namespace {

const std::vector<KernelEntry>& kernel_table() {
  static const std::vector<KernelEntry> table = [] {
    std::vector<KernelEntry> t;
    register_elementwise_kernels(t);
    register_fused_kernels(t);
    register_copy_kernels(t);
    register_matmul_kernels(t);
    register_conv_kernels(t);
    register_pool_kernels(t);
    register_reduce_kernels(t);
    register_resize_kernels(t);
    register_generator_kernels(t);
    std::sort(t.begin(), t.end(), [](const auto& a, const auto& b) { return a.op_type < b.op_type; });
    return t;
  }();
  return table;
}

const KernelEntry* find_entry(std::string_view op_type) {
  const auto& t = kernel_table();
  auto it = std::lower_bound(t.begin(), t.end(), op_type,
                             [](const KernelEntry& e, std::string_view op) { return e.op_type < op; });
  return it != t.end() && it->op_type == op_type ? &*it : nullptr;
}

}  // namespace

bool has_kernel(std::string_view op_type) { return find_entry(op_type) != nullptr; }

Result<std::unique_ptr<Kernel>> create_kernel(const KernelRequest& request) {
  const Node& node = request.node;
  bool known_domain = node.domain.empty() || node.domain == "strider";
  const KernelEntry* entry = known_domain ? find_entry(node.op_type) : nullptr;
  if (entry == nullptr)
    return unsupported(fmt::format("no CPU kernel for {}", request.node.op_type));
  auto kernel = entry->create(request);
  if (!kernel.is_ok())
    return kernel.status().with_context(
        fmt::format("node '{}' ({})", request.node.name, request.node.op_type));
  return kernel;
}

double read_as_double(const std::byte* p, DType dtype) {
  return dispatch_dtype(dtype, [p]<typename T>() {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return double(load(v));
  });
}

}  // namespace strider::cpu
