#include "hal/cuda/cuda_kernels.h"

#include "hal/kernel_table.h"

namespace strider::cuda {
namespace {

const KernelTable<KernelEntry>& kernel_table() {
  static const KernelTable<KernelEntry> table = [] {
    std::vector<KernelEntry> t;
    register_elementwise_kernels(t);
    register_copy_kernels(t);
    register_reduce_kernels(t);
    register_pool_kernels(t);
    register_resize_kernels(t);
    register_matmul_kernels(t);
    register_conv_kernels(t);
    register_normalization_kernels(t);
    register_index_map_kernels(t);
    register_scatter_kernels(t);
    register_attention_kernels(t);
    return KernelTable<KernelEntry>(std::move(t));
  }();
  return table;
}

}  // namespace

bool has_kernel(std::string_view op_type) { return kernel_table().find(op_type) != nullptr; }

Result<std::unique_ptr<Kernel>> create_kernel(const KernelRequest& request, const CudaContext& context) {
  STRIDER_ASSIGN_OR_RETURN(const KernelEntry* entry, kernel_table().entry_for(request.node, "CUDA"));
  return for_node(entry->create(request, context), request.node);
}

}  // namespace strider::cuda
