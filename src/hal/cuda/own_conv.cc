#include "hal/cuda/own_conv.h"

#include <span>
#include <vector>

#include "hal/cuda/cuda_kernels.h"
#include "hal/cuda/depthwise_conv.h"
#include "hal/cuda/device_buffer.h"
#include "hal/cuda/direct_conv.h"

namespace strider::cuda {
namespace {

using KernelPtr = std::unique_ptr<Kernel>;

// Shapes, window and strides of x and y (both as 4-D) into a launch's arguments.
template <typename Args>
void set_geometry(const ConvSetup& c, Args& a) {
  TensorView x = at_least_4d(c.x), y = at_least_4d(c.y);
  a.n = int32_t(x.sizes[0]), a.c = int32_t(x.sizes[1]), a.h = int32_t(x.sizes[2]), a.w = int32_t(x.sizes[3]);
  a.oh = int32_t(y.sizes[2]), a.ow = int32_t(y.sizes[3]);
  const WindowGeometry& g = c.window;
  const size_t d = g.kernel.size() - 1;  // the last spatial dim (the only one when 1-D)
  a.kw = int32_t(g.kernel[d]), a.stride_w = int32_t(g.strides[d]);
  a.pad_w = int32_t(g.pads_begin[d]), a.dilation_w = int32_t(g.dilations[d]);
  a.kh = 1, a.stride_h = 1, a.pad_h = 0, a.dilation_h = 1;
  if (d == 1) {
    a.kh = int32_t(g.kernel[0]), a.stride_h = int32_t(g.strides[0]);
    a.pad_h = int32_t(g.pads_begin[0]), a.dilation_h = int32_t(g.dilations[0]);
  }
  for (size_t i = 0; i < 4; ++i) a.xs[i] = x.strides[i], a.ys[i] = y.strides[i];
  a.epilogue = c.epilogue;
  a.x = x.allocation->address() + x.byte_offset;
  a.y = y.allocation->address() + y.byte_offset;
}

// The 2-D (or 1-D) convolutions these kernels take: rank 3 or 4, sizes the int32 launch
// arguments hold, constant weights and bias.
bool own_kernels_apply(const ConvSetup& c, const KernelRequest& r) {
  if (c.x.rank() < 3 || c.x.rank() > 4 || r.constant_input(1) == nullptr) return false;
  if (c.bias.allocation && r.constant_input(2) == nullptr) return false;
  for (const TensorView* v : {&c.x, &c.y})
    for (int64_t size : v->sizes)
      if (size >= int64_t(INT32_MAX)) return false;
  return true;
}

std::vector<float> bias_as_f32(const Tensor* bias, int64_t channels, int64_t padded) {
  std::vector<float> b(size_t(padded), 0.0f);
  for (int64_t ch = 0; ch < channels && bias; ++ch) b[size_t(ch)] = float(bias->element_as_double(ch));
  return b;
}

class DepthwiseConv final : public Kernel {
 public:
  Status init(const ConvSetup& c, const Tensor& weights, const Tensor* bias) {
    DepthwiseArgs& a = launch_.args;
    set_geometry(c, a);
    a.channels_inner = c.y.strides[1] == 1 && a.c > 1;
    // Weights [C, 1, taps] -> f32 [taps][C].
    const int64_t taps = int64_t(a.kh) * a.kw;
    std::vector<float> w(size_t(taps * a.c));
    for (int64_t ch = 0; ch < a.c; ++ch)
      for (int64_t t = 0; t < taps; ++t) w[size_t(t * a.c + ch)] = float(weights.element_as_double(ch * taps + t));
    STRIDER_RETURN_IF_ERROR(weights_.upload(std::as_bytes(std::span(w))));
    a.weights = weights_.as<float>();
    if (bias) {
      const std::vector<float> b = bias_as_f32(bias, a.c, a.c);
      STRIDER_RETURN_IF_ERROR(bias_.upload(std::as_bytes(std::span(b))));
      a.bias = bias_.as<float>();
    }
    return prepare_depthwise(c.y.dtype, &launch_);
  }
  Status run(const QueueContext& queue) override { return run_depthwise(launch_, stream_of(queue)); }
  std::string implementation() const override {
    return launch_.args.epilogue.activation != ConvActivation::kNone ? "strider-cuda:depthwise-conv+program" : "strider-cuda:depthwise-conv";
  }

 private:
  DepthwiseLaunch launch_;
  DeviceBuffer weights_, bias_;
};

class DirectConv final : public Kernel {
 public:
  Status init(const ConvSetup& c, const Tensor& weights, const Tensor* bias) {
    DirectConvArgs& a = launch_.args;
    set_geometry(c, a);
    a.k = int32_t(c.y.sizes[1]);
    // Weights [K, C, taps] -> f32 [K / kDirectOutputs][C * taps][kDirectOutputs], zero-padded.
    const int64_t taps = int64_t(a.c) * a.kh * a.kw, groups = (a.k + kDirectOutputs - 1) / kDirectOutputs;
    std::vector<float> w(size_t(groups * taps * kDirectOutputs), 0.0f);
    for (int64_t o = 0; o < a.k; ++o)
      for (int64_t t = 0; t < taps; ++t)
        w[size_t(((o / kDirectOutputs) * taps + t) * kDirectOutputs + o % kDirectOutputs)] =
            float(weights.element_as_double(o * taps + t));
    STRIDER_RETURN_IF_ERROR(weights_.upload(std::as_bytes(std::span(w))));
    a.weights = weights_.as<float>();
    if (bias) {
      const std::vector<float> b = bias_as_f32(bias, a.k, groups * kDirectOutputs);
      STRIDER_RETURN_IF_ERROR(bias_.upload(std::as_bytes(std::span(b))));
      a.bias = bias_.as<float>();
    }
    return prepare_direct_conv(c.y.dtype, &launch_);
  }
  Status run(const QueueContext& queue) override { return run_direct_conv(launch_, stream_of(queue)); }
  std::string implementation() const override {
    return launch_.args.epilogue.activation != ConvActivation::kNone ? "strider-cuda:direct-conv+program" : "strider-cuda:direct-conv";
  }

 private:
  DirectConvLaunch launch_;
  DeviceBuffer weights_, bias_;
};

}  // namespace

std::optional<KernelPtr> depthwise_conv_kernel(const ConvSetup& c, const KernelRequest& r) {
  const int64_t channels = c.x.sizes[1];
  if (!own_kernels_apply(c, r) || c.group != channels || c.group < 2 || c.y.sizes[1] != channels || c.w.sizes[1] != 1)
    return std::nullopt;
  auto kernel = std::make_unique<DepthwiseConv>();
  if (!kernel->init(c, *r.constant_input(1), c.bias.allocation ? r.constant_input(2) : nullptr).is_ok())
    return std::nullopt;
  return KernelPtr(std::move(kernel));
}

std::optional<KernelPtr> direct_conv_kernel(const ConvSetup& c, const KernelRequest& r) {
  if (!own_kernels_apply(c, r) || c.group != 1) return std::nullopt;
  // Channels-last inputs of more than a few channels: a warp's neighbouring pixels lie C
  // elements apart, and on YOLOv8n's NHWC channel slices this kernel took 0.3-1.0 ms where
  // a Materialize and cuDNN took 0.04 + 0.06; the planner makes that pair when the node is
  // refused here.
  if (c.x.strides[1] == 1 && c.x.sizes[1] > 4) return std::nullopt;
  auto kernel = std::make_unique<DirectConv>();
  if (!kernel->init(c, *r.constant_input(1), c.bias.allocation ? r.constant_input(2) : nullptr).is_ok())
    return std::nullopt;
  return KernelPtr(std::move(kernel));
}

}  // namespace strider::cuda
