// Pooling on the GPU with the CPU kernels' semantics: MaxPool (with its optional Indices
// output and storage_order), AveragePool (count_include_pad), both with pads, auto_pad,
// dilations and ceil_mode through resolve_window, on f32/f16/bf16/f64 (MaxPool also on
// i8/u8); GlobalAveragePool and GlobalMaxPool as reductions over the spatial dims, one
// block per (n, c) when the plane is large. Launches live in pool.cu and reduce.cu.
#include <fmt/format.h>

#include "hal/cuda/cuda_kernels.h"
#include "hal/cuda/launch.h"
#include "ops/shape_ops.h"

namespace strider::cuda {

using KernelPtr = std::unique_ptr<Kernel>;
namespace {

class PoolKernel final : public Kernel {
 public:
  PoolKernel(std::string name, PoolLaunch launch) : name_(std::move(name)), launch_(launch) {}
  Status run(const QueueContext& context) override { return run_pool(launch_, stream_of(context)); }
  std::string implementation() const override { return "strider-cuda:" + name_; }

 private:
  std::string name_;
  PoolLaunch launch_;
};

class GlobalPoolKernel final : public Kernel {
 public:
  GlobalPoolKernel(std::string name, ReduceLaunch launch) : name_(std::move(name)), launch_(launch) {}
  Status run(const QueueContext& context) override { return run_reduce(launch_, stream_of(context)); }
  std::string implementation() const override { return "strider-cuda:" + name_; }

 private:
  std::string name_;
  ReduceLaunch launch_;
};

// f32, f16, bf16, f64; i8 and u8 for max pools only (as on the CPU).
Status check_dtypes(const KernelRequest& r, bool max) {
  DType dtype = r.inputs[0].dtype;
  bool byte = dtype == DType::kI8 || dtype == DType::kU8;
  if (!is_floating(dtype) && !(byte && max))
    return unsupported(fmt::format("{} on {}", r.node.op_type, dtype_name(dtype)));
  if (r.inputs[0].rank() < 3) return invalid_argument(fmt::format("{} of {}", r.node.op_type, r.inputs[0].to_string()));
  if (r.outputs[0].dtype != dtype)
    return invalid_argument(fmt::format("{} output is {}, input {}", r.node.op_type, dtype_name(r.outputs[0].dtype),
                                        dtype_name(dtype)));
  return Status::ok();
}

Result<KernelPtr> make_window_pool(const KernelRequest& r, bool max) {
  STRIDER_RETURN_IF_ERROR(check_dtypes(r, max));
  const AttributeMap& a = r.node.attributes;
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, a.require_ints("kernel_shape"));
  STRIDER_ASSIGN_OR_RETURN(int64_t ceil_mode, a.get_int("ceil_mode", 0));
  STRIDER_ASSIGN_OR_RETURN(int64_t include_pad, a.get_int("count_include_pad", 0));
  STRIDER_ASSIGN_OR_RETURN(int64_t storage_order, a.get_int("storage_order", 0));
  const TensorView& x = r.inputs[0];
  std::span<const int64_t> spatial(x.sizes.begin() + 2, x.sizes.end());
  STRIDER_ASSIGN_OR_RETURN(WindowGeometry g, resolve_window(NodeInputs(r.graph, r.node), spatial, kernel, ceil_mode != 0));
  PoolSpec spec;
  spec.max = max;
  spec.count_include_pad = include_pad != 0;
  spec.column_major_indices = storage_order != 0;
  spec.x = x;
  spec.y = r.outputs[0];
  if (max && r.outputs.size() > 1 && r.outputs[1].allocation) {
    spec.indices = r.outputs[1];
    if (spec.indices.dtype != DType::kI64 || spec.indices.sizes != spec.y.sizes)
      return invalid_argument(fmt::format("MaxPool Indices {} for output {}", spec.indices.to_string(), spec.y.to_string()));
  }
  Shape expected(x.sizes.begin(), x.sizes.begin() + 2);
  expected.insert(expected.end(), g.output.begin(), g.output.end());
  if (spec.y.sizes != expected)
    return invalid_argument(fmt::format("{} output {} for window output {}", r.node.op_type, spec.y.to_string(),
                                        shape_to_string(expected)));
  spec.kernel = g.kernel;
  spec.strides = g.strides;
  spec.dilations = g.dilations;
  spec.pads_begin = g.pads_begin;
  spec.pads_end = g.pads_end;
  PoolLaunch launch;
  STRIDER_RETURN_IF_ERROR(prepare_pool(spec, &launch));
  return KernelPtr(new PoolKernel(max ? "maxpool" : "avgpool", launch));
}

// A global pool reduces each (n, c) plane: the average as ReduceMean does, the maximum as
// MaxPool takes it (kPoolMax).
Result<KernelPtr> make_global_pool(const KernelRequest& r, bool max) {
  STRIDER_RETURN_IF_ERROR(check_dtypes(r, max));
  const TensorView& x = r.inputs[0];
  const TensorView& y = r.outputs[0];
  if (y.rank() != x.rank() || y.sizes[0] != x.sizes[0] || y.sizes[1] != x.sizes[1] || y.num_elements() != x.sizes[0] * x.sizes[1])
    return invalid_argument(fmt::format("{} of {} into {}", r.node.op_type, x.to_string(), y.to_string()));
  ReduceSpec spec;
  spec.kind = max ? ReduceKind::kPoolMax : ReduceKind::kMean;
  spec.in = x;
  spec.out = y;
  spec.row_sizes = {x.sizes[0], x.sizes[1]};
  spec.in_row_strides = {x.strides[0], x.strides[1]};
  spec.out_row_strides = {y.strides[0], y.strides[1]};
  spec.inner_sizes.assign(x.sizes.begin() + 2, x.sizes.end());
  spec.in_inner_strides.assign(x.strides.begin() + 2, x.strides.end());
  ReduceLaunch launch;
  STRIDER_RETURN_IF_ERROR(prepare_reduce(spec, &launch));
  return KernelPtr(new GlobalPoolKernel(max ? "globalmaxpool" : "globalavgpool", launch));
}

template <bool kMax>
Result<KernelPtr> window_pool(const KernelRequest& r, const CudaContext&) {
  return make_window_pool(r, kMax);
}
template <bool kMax>
Result<KernelPtr> global_pool(const KernelRequest& r, const CudaContext&) {
  return make_global_pool(r, kMax);
}

}  // namespace

void register_pool_kernels(std::vector<KernelEntry>& table) {
  table.push_back({"MaxPool", window_pool<true>});
  table.push_back({"AveragePool", window_pool<false>});
  table.push_back({"GlobalMaxPool", global_pool<true>});
  table.push_back({"GlobalAveragePool", global_pool<false>});
}

}  // namespace strider::cuda
