#include "hal/cpu/cpu_kernels.h"

#include <algorithm>
#include <cstring>

#include "base/small_types.h"
#include "hal/cpu/dtype_dispatch.h"
#include "hal/cpu/widened_kernels.h"
#include "hal/kernel_table.h"

namespace strider::cpu {
namespace {

const KernelTable<KernelEntry>& kernel_table() {
  static const KernelTable<KernelEntry> table = [] {
    std::vector<KernelEntry> t;
    register_elementwise_kernels(t);
    register_fused_kernels(t);
    register_copy_kernels(t);
    register_scatter_kernels(t);
    register_matmul_kernels(t);
    register_conv_kernels(t);
    register_conv_chain_kernels(t);
    register_gated_stack_kernels(t);
    register_wavenet_layer_kernels(t);
    register_fused_matmul_kernels(t);
    register_pool_kernels(t);
    register_reduce_kernels(t);
    register_resize_kernels(t);
    register_grid_kernels(t);
    register_generator_kernels(t);
    register_normalization_kernels(t);
    register_index_map_kernels(t);
    register_attention_kernels(t);
    return KernelTable<KernelEntry>(std::move(t));
  }();
  return table;
}

}  // namespace

bool has_kernel(std::string_view op_type) { return kernel_table().find(op_type) != nullptr; }

namespace {

// The bf16 kernel of a widening entry: native where oneDNN has fast bf16 kernels and gives
// one for these views, else widened (when that yields a faster one), else native.
Result<std::unique_ptr<Kernel>> create_bf16_kernel(const KernelEntry& entry, const KernelRequest& request,
                                                   Bf16Arithmetic bf16) {
  if (bf16 == Bf16Arithmetic::kAuto && onednn_has_bf16_kernels()) {
    auto native = entry.create(request);
    if (!native.is_ok() || !runs_slow_loops(**native)) return native;
  }
  auto widened = make_widened_kernel(request, entry.create);
  if (widened.is_ok() || widened.status().code() != StatusCode::kUnsupported || bf16 == Bf16Arithmetic::kWidened)
    return widened;
  return entry.create(request);
}

// The storage-only types (base/small_types.h) reach only the kernels that move bytes and
// Cast, which converts them; dispatch_dtype hands them out as bytes, which would be a wrong
// answer anywhere else, so every other kernel is refused here, in one place.
Status check_small_types(const KernelRequest& request) {
  static constexpr std::string_view kByteMovers[] = {"Cast", "CastLike", "Identity", "Dropout", "Reshape", "Flatten",
                                                     "Squeeze", "Unsqueeze", "Transpose", "Slice", "Split", "Expand",
                                                     "Materialize", "Concat", "Gather", "GatherElements"};
  for (const auto* views : {&request.inputs, &request.outputs})
    for (const TensorView& v : *views)
      if (v.allocation && is_small_type(v.dtype) &&
          std::find(std::begin(kByteMovers), std::end(kByteMovers), request.node.op_type) == std::end(kByteMovers))
        return unsupported(fmt::format("{} holds {}, a storage-only type: Cast it to a type strider computes in",
                                       request.node.op_type, dtype_name(v.dtype)));
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<Kernel>> create_kernel(const KernelRequest& request, Bf16Arithmetic bf16) {
  STRIDER_ASSIGN_OR_RETURN(const KernelEntry* entry, kernel_table().entry_for(request.node, "CPU"));
  if (Status s = check_small_types(request); !s.is_ok())
    return s.with_context(fmt::format("node '{}' ({})", request.node.name, request.node.op_type));
  if (entry->widens_bf16 && bf16 != Bf16Arithmetic::kNative && has_bf16_operand(request))
    return for_node(create_bf16_kernel(*entry, request, bf16), request.node);
  return for_node(entry->create(request), request.node);
}

double read_as_double(const std::byte* p, DType dtype) {
  if (is_small_type(dtype)) return small_type_to_double(uint8_t(*p), dtype);
  return dispatch_dtype(dtype, [p]<typename T>() {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return double(load(v));
  });
}

}  // namespace strider::cpu
