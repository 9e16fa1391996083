// The convolutions conv.cc may choose instead of cuDNN's: strider's own depthwise
// (depthwise_conv.h), direct (direct_conv.h), small-product (small_gemm.h), register-tiled
// (tiled_conv.h) and tensor-core (mma_conv.h) kernels. Each factory returns nullopt where its kernel does not apply (non-constant weights, groups,
// too many taps, layouts), so the caller simply offers what it gets to the timed choice
// (timed_choice.h). Each applies the setup's epilogue, if any.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "hal/cuda/cuda_kernels.h"
#include "hal/cuda/device_buffer.h"
#include "hal/cuda/launch.h"
#include "hal/kernel.h"
#include "hal/matmul_views.h"
#include "ops/shape_ops.h"

namespace strider::cuda {

// One Conv node's operands and window, resolved once.
struct ConvSetup {
  TensorView x, w, bias, y;  // bias.allocation is null when absent
  int64_t group = 1;
  WindowGeometry window;
  // A FusedConv's activation, when its program is one the own kernels apply before they
  // store (launch.h's ConvEpilogue).
  ConvEpilogue epilogue;
};

// cuDNN and the own kernels want at least 4 dims: a 1-D convolution gets a unit height.
inline TensorView at_least_4d(const TensorView& v) { return v.rank() >= 4 ? v : insert_unit_dim(v, 2); }

// The depthwise kernel's 4-channel vector form (first, where the views allow it) and its
// scalar form; empty where neither applies.
std::vector<std::unique_ptr<Kernel>> depthwise_conv_kernels(const ConvSetup& c, const KernelRequest& r);
// cuDNN operation graphs of conv -> bias -> the setup's activation, one kernel per engine
// that builds and stays inside its output view (cudnn_graph_conv.cc says where they apply);
// empty where none does.
std::vector<std::unique_ptr<Kernel>> cudnn_graph_conv_kernels(const ConvSetup& c, const KernelRequest& r,
                                                              const CudaContext& context);
// Constant weights [K, C, spatial...] reordered on the host to [K, spatial..., C] (what
// cuDNN's channels-last kernels want) and uploaded into `out`, once.
Status upload_krsc_weights(const TensorView& w, const Tensor& constant, DeviceBuffer* out);
std::optional<std::unique_ptr<Kernel>> direct_conv_kernel(const ConvSetup& c, const KernelRequest& r);
// The convolution as strider's small product (small_gemm.h, an implicit im2col), one
// kernel per tile height and split worth timing; f32, one group, small outputs only.
std::vector<std::unique_ptr<Kernel>> small_conv_kernels(const ConvSetup& c, const KernelRequest& r);
// The register-tiled f32 convolution (tiled_conv.h, an implicit GEMM for large outputs) in
// its five tile sizes; f32, one group; empty with STRIDER_CUDA_TILED_CONV=off.
std::vector<std::unique_ptr<Kernel>> tiled_conv_kernels(const ConvSetup& c, const KernelRequest& r);
// The tensor-core convolution (mma_conv.h) where it applies; it adds `addends` (views with
// y's layout and dtype, at most kMaxMmaConvAddends) after the setup's epilogue. `gated`: a
// FusedGatedConv's, y holding tanh(a) * sigmoid(b) of the weights' two halves of channels
// (plus the addends).
std::optional<std::unique_ptr<Kernel>> mma_conv_kernel(const ConvSetup& c, const KernelRequest& r,
                                                       const std::vector<TensorView>& addends, bool gated = false);

}  // namespace strider::cuda
