// The normalization family on the GPU: the node's parameters (ops/normalization.h) and its
// operands as rows and inner elements (hal/normalization_views.h), both shared with the
// CPU, become one launch of normalize.cu.
#include <fmt/format.h>

#include "hal/cuda/cuda_kernels.h"
#include "hal/cuda/launch.h"
#include "hal/normalization_views.h"

namespace strider::cuda {
namespace {

class NormalizationKernel final : public Kernel {
 public:
  NormalizationKernel(std::string name, NormLaunch launch) : name_(std::move(name)), launch_(launch) {}
  Status run(const QueueContext& context) override { return run_normalize(launch_, stream_of(context)); }
  std::string implementation() const override { return "strider-cuda:" + name_; }

 private:
  std::string name_;
  NormLaunch launch_;
};

template <typename T>
T* data_or_null(const TensorView& view) {
  return view.allocation ? device_data<T>(view) : nullptr;
}

Result<std::unique_ptr<Kernel>> make_normalization(const KernelRequest& r, const CudaContext&) {
  STRIDER_ASSIGN_OR_RETURN(NormalizationParams p, resolve_normalization(NodeInputs(r.graph, r.node)));
  const std::array<TensorView, kNormOperands> operands = normalization_operands(p, r);
  STRIDER_ASSIGN_OR_RETURN(NormalizationViews v, normalization_views(p, operands));
  NormSpec spec;
  spec.row_sizes = v.row_sizes;
  spec.inner_sizes = v.inner_sizes;
  spec.row_strides.assign(v.row_strides.begin(), v.row_strides.end());
  spec.inner_strides.assign(v.inner_strides.begin(), v.inner_strides.begin() + 4);
  spec.dtype = r.inputs[0].dtype;
  const TensorView& stat = operands[kNormMean].allocation ? operands[kNormMean] : operands[kNormInvStd];
  if (stat.allocation) spec.stat_dtype = stat.dtype;
  spec.x = device_data<const std::byte>(operands[kNormX]);
  spec.y = device_data<std::byte>(operands[kNormY]);
  spec.scale = data_or_null<const std::byte>(operands[kNormScale]);
  spec.bias = data_or_null<const std::byte>(operands[kNormBias]);
  spec.mean = data_or_null<std::byte>(operands[kNormMean]);
  spec.inv_std = data_or_null<std::byte>(operands[kNormInvStd]);
  spec.epsilon = p.epsilon;
  spec.subtract_mean = p.subtract_mean;
  spec.epsilon_after_sqrt = p.epsilon_after_sqrt;
  NormLaunch launch;
  Status s = prepare_normalize(spec, &launch);
  if (s.code() == StatusCode::kUnsupported)
    return unsupported(fmt::format("{} on {} is not supported: {}", r.node.op_type, dtype_name(spec.dtype), s.message()));
  STRIDER_RETURN_IF_ERROR(s);
  return std::unique_ptr<Kernel>(new NormalizationKernel(r.node.op_type, launch));
}

}  // namespace

void register_normalization_kernels(std::vector<KernelEntry>& table) {
  for (std::string_view op : {"LayerNormalization", "RMSNormalization", "InstanceNormalization", "GroupNormalization",
                              "MeanVarianceNormalization"})
    table.push_back({op, make_normalization});
}

}  // namespace strider::cuda
