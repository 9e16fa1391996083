// FusedAttention on the GPU: the node's score program (ops/fused_attention.h) and its
// operands' strides (hal/attention_views.h), both shared with the CPU, become one launch of
// attention.cu.
#include <fmt/format.h>

#include "hal/attention_views.h"
#include "hal/cuda/attention.h"
#include "hal/cuda/cuda_kernels.h"

namespace strider::cuda {
namespace {

class AttentionKernel final : public Kernel {
 public:
  AttentionKernel(AttentionLaunch launch, std::string expression) : launch_(launch), expression_(std::move(expression)) {}
  Status run(const QueueContext& context) override { return run_attention(launch_, stream_of(context)); }
  std::string implementation() const override { return fmt::format("strider-cuda:attention({}) {}", launch_.kernel, expression_); }

 private:
  AttentionLaunch launch_;
  std::string expression_;
};

Result<std::unique_ptr<Kernel>> make_attention(const KernelRequest& r, const CudaContext& context) {
  STRIDER_ASSIGN_OR_RETURN(FusedAttentionParams p, read_fused_attention(r.node));
  STRIDER_ASSIGN_OR_RETURN(AttentionViews v, attention_views(p, r));
  if (v.operands() > kAttentionOperands) return invalid_argument("FusedAttention has too many step operands");
  AttentionLaunch launch;
  STRIDER_ASSIGN_OR_RETURN(DeviceLimits limits, device_limits(context, r.node));
  STRIDER_RETURN_IF_ERROR(prepare_attention(r.inputs[kAttnQ].dtype, v.head, v.v_head, v.q_len, v.batch, v.batch_strides,
                                            limits.multiprocessors, &launch));
  launch.q_len = v.q_len;
  launch.head = v.head;
  launch.keys = v.keys;
  launch.v_head = v.v_head;
  for (int k = 0; k < v.operands(); ++k) {
    launch.row[k] = v.row_stride[size_t(k)];
    launch.col[k] = v.col_stride[size_t(k)];
    launch.data[k] = device_data<const std::byte>(v.views[size_t(k)]);
  }
  launch.steps = int(p.steps.size());
  for (size_t k = 0; k < p.steps.size(); ++k) {
    const ScoreStep step = division_as_product(p.steps[k]);  // exact: no division per score
    launch.step_kind[k] = step.kind;
    launch.step_value[k] = step.value;
  }
  launch.zero_invalid_rows = p.zero_invalid_rows;
  return std::unique_ptr<Kernel>(new AttentionKernel(launch, describe_fused_attention(p)));
}

}  // namespace

void register_attention_kernels(std::vector<KernelEntry>& table) { table.push_back({kFusedAttentionOp, make_attention}); }

}  // namespace strider::cuda
