#include "hal/cuda/cuda_kernels.h"

#include "hal/kernel_table.h"

namespace strider::cuda {
// The CUDA kernels are instantiated for the element types a model on a GPU uses (floats,
// i64, i32, i8, u8, bool); the 16-bit integers and the wide unsigned ones, which the CPU
// computes, and the storage-only float8, float4, 4- and 2-bit types (the CPU's Cast converts
// them), are refused here in one place rather than by each kernel's dtype switch.
bool no_kernel_takes(DType dtype) {
  return dtype == DType::kI16 || dtype == DType::kU16 || dtype == DType::kU32 || dtype == DType::kU64 ||
         is_small_type(dtype);
}

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
    register_gated_stack_kernels(t);
    register_wavenet_layer_kernels(t);
    return KernelTable<KernelEntry>(std::move(t));
  }();
  return table;
}

Status check_dtypes(const KernelRequest& request) {
  for (const auto* views : {&request.inputs, &request.outputs})
    for (const TensorView& v : *views)
      if (v.allocation && no_kernel_takes(v.dtype))
        return unsupported(fmt::format("no CUDA kernel takes {} (node '{}')", dtype_name(v.dtype), request.node.name));
  return Status::ok();
}

}  // namespace

bool has_kernel(std::string_view op_type) { return kernel_table().find(op_type) != nullptr; }

std::string declines(const Graph& graph, const Node& node) {
  if (!has_kernel(node.op_type)) return fmt::format("cuda has no {} kernel", node.op_type);
  for (const auto* ids : {&node.inputs, &node.outputs})
    for (ValueId id : *ids)
      if (id != kNoValue && no_kernel_takes(graph.value(id).dtype))
        return fmt::format("no cuda kernel takes {}", dtype_name(graph.value(id).dtype));
  return {};
}

Result<DeviceLimits> device_limits(const CudaContext& context, const Node& node) {
  int sms = 0, shared = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, context.ordinal) != cudaSuccess ||
      cudaDeviceGetAttribute(&shared, cudaDevAttrMaxSharedMemoryPerBlockOptin, context.ordinal) != cudaSuccess) {
    cudaGetLastError();
    return device_error(fmt::format("{}: the device's multiprocessors or shared memory could not be read", describe_node(node)));
  }
  return DeviceLimits{sms, size_t(shared)};
}

Result<std::unique_ptr<Kernel>> create_kernel(const KernelRequest& request, const CudaContext& context) {
  STRIDER_ASSIGN_OR_RETURN(const KernelEntry* entry, kernel_table().entry_for(request.node, "CUDA"));
  STRIDER_RETURN_IF_ERROR(check_dtypes(request));
  return for_node(entry->create(request, context), request.node);
}

}  // namespace strider::cuda
