// The CPU's convolution pieces that kernels beyond Conv's own build on (the pointwise +
// depthwise chain, hal/cpu/conv_chain_kernel.cc): a node's convolution resolved over its
// views, one oneDNN convolution primitive over such a setup, and the Conv kernel factory.
// Defined in hal/cpu/conv_kernels.cc.
#pragma once

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "hal/cpu/cpu_kernels.h"
#include "hal/cpu/epilogue.h"
#include "hal/cpu/onednn.h"
#include "ops/fused_elementwise.h"
#include "ops/shape_ops.h"

namespace strider::cpu {

struct ConvSetup {
  TensorView x, w, bias, y;  // bias.allocation is null when absent
  int64_t group = 1;
  WindowGeometry window;
  // FusedConv: the program applied to the result (register 0), over the node's inputs from
  // 3 on (registers 1...: a residual), and its oneDNN post-ops when it peels into them.
  std::optional<FusedProgram> activation;
  std::vector<TensorView> operands;
  std::optional<PostOpPlan> post_ops;
};

// The Conv or FusedConv of `r` over its views (attributes, window, program).
Result<ConvSetup> resolve_conv(const KernelRequest& r);
// Multiply-adds of the whole convolution.
int64_t multiply_adds(const ConvSetup& c);

class OneDnnConv final : public OneDnnPrimitiveKernel {
 public:
  OneDnnConv() : OneDnnPrimitiveKernel("Conv") {}
  // With `with_post_ops` the setup's post-op plan rides along (c.post_ops must hold one).
  // `team`: the OpenMP team it is created for (0: by its size, onednn_team_for). With
  // `shared_weights`, constant weights reordered by an earlier band are reused when the
  // layout matches, and a reorder made here is left there for the next.
  Status init(const ConvSetup& c, const Tensor* constant_weights, bool with_post_ops, const std::string& node,
              std::optional<int> team = std::nullopt, dnnl::memory* shared_weights = nullptr);
  bool applies_activation() const { return applies_activation_; }
  // Runs on `x` and `y` instead of the setup's source and destination: the addresses of
  // element [0, ...] of views with the sizes and strides it was made for. The kernel's
  // memory handles change, so one kernel serves one thread at a time.
  Status run_at(std::byte* x, std::byte* y) {
    return onednn_call(what_, [&] {
      args_.at(DNNL_ARG_SRC).set_data_handle(x);
      args_.at(DNNL_ARG_DST).set_data_handle(y);
      onednn_execute(primitive_, args_, team_);
    });
  }

 private:
  bool applies_activation_ = false;
};

// The kernel of a Conv or FusedConv node (oneDNN in bands, Winograd, a matmul, or the
// naive convolution for other dtypes); UNSUPPORTED for strided views no fast path takes.
Result<std::unique_ptr<Kernel>> make_conv(const KernelRequest& r);

}  // namespace strider::cpu
