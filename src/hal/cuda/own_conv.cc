#include "hal/cuda/own_conv.h"

#include <fmt/format.h>

#include <cstdlib>
#include <span>
#include <string_view>
#include <vector>

#include "hal/cuda/cuda_kernels.h"
#include "hal/cuda/depthwise_conv.h"
#include "hal/cuda/device_buffer.h"
#include "hal/cuda/direct_conv.h"
#include "hal/cuda/epilogue.h"
#include "hal/cuda/mma_conv.h"
#include "hal/cuda/small_matmul.h"
#include "hal/cuda/tiled_conv.h"

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
  Status init(const ConvSetup& c, const Tensor& weights, const Tensor* bias, bool vector) {
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
    return prepare_depthwise(c.y.dtype, vector, &launch_);
  }
  bool vector() const { return launch_.args.lanes > 1; }
  Status run(const QueueContext& queue) override { return run_depthwise(launch_, stream_of(queue)); }
  std::string implementation() const override {
    return std::string(vector() ? "strider-cuda:vector-depthwise-conv" : "strider-cuda:depthwise-conv") +
           (launch_.args.epilogue.activation != ConvActivation::kNone ? "+program" : "");
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

// The tensor-core convolution (mma_conv.h) with its weights repacked once as T
// [tiles * 64][kw][c_pad] (the constant's own bits, no rounding) and the bias as f32, in
// the row order of the kernel's tiles: output channels in order, or for a gated unit 32 of
// the first half then the same 32 of the second half a tile.
class MmaConv final : public Kernel {
 public:
  Status init(const ConvSetup& c, const Tensor& weights, const Tensor* bias, const std::vector<TensorView>& addends,
              bool gated) {
    MmaConvArgs& a = launch_.args;
    set_geometry(c, a);
    a.gated = gated;
    a.k = int32_t(c.y.sizes[1]);
    a.c_pad = (a.c + kMmaConvTile - 1) / kMmaConvTile * kMmaConvTile;
    if (weights.dtype() != c.y.dtype || dtype_size(weights.dtype()) != 2) return unsupported("weights of another dtype");
    const int64_t conv_k = weights.shape()[0], rows = mma_conv_tiles(a) * int64_t(kMmaConvTile);
    if (conv_k != (gated ? 2 * int64_t(a.k) : a.k)) return internal_error("tensor-core convolution: weights and output");
    // The conv channel of each tile row, -1 for padding.
    std::vector<int64_t> channel(size_t(rows), -1);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t tile = r / kMmaConvTile, at = r % kMmaConvTile, half = kMmaConvTile / 2;
      const int64_t o = gated ? tile * half + at % half : r;
      if (o < a.k) channel[size_t(r)] = gated && at >= half ? o + a.k : o;
    }
    // Weights [K, C, 1, kw] (or [K, C, kw]) -> [rows][kw][c_pad].
    const auto* source = reinterpret_cast<const uint16_t*>(weights.bytes());
    std::vector<uint16_t> w(size_t(rows * a.kw * a.c_pad), 0);
    std::vector<float> b(size_t(rows), 0.0f);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t o = channel[size_t(r)];
      if (o < 0) continue;
      if (bias) b[size_t(r)] = float(bias->element_as_double(o));
      for (int64_t ch = 0; ch < a.c; ++ch)
        for (int64_t j = 0; j < a.kw; ++j) w[size_t((r * a.kw + j) * a.c_pad + ch)] = source[(o * a.c + ch) * a.kw + j];
    }
    STRIDER_RETURN_IF_ERROR(weights_.upload(std::as_bytes(std::span(w))));
    a.weights = weights_.as<void>();
    if (bias) {
      STRIDER_RETURN_IF_ERROR(bias_.upload(std::as_bytes(std::span(b))));
      a.bias = bias_.as<float>();
    }
    for (const TensorView& v : addends) a.addends[a.addend_count++] = v.allocation->address() + v.byte_offset;
    const TensorView y = at_least_4d(c.y);
    int64_t yn[4], ys[4];
    for (size_t i = 0; i < 4; ++i) yn[i] = y.sizes[i], ys[i] = y.strides[i];
    a.chunk_stores = a.k % 8 == 0 && mma_conv_rows(yn, ys, int64_t(reinterpret_cast<uintptr_t>(a.y) / 2), 8);
    for (const void* addend : a.addends)
      a.chunk_stores = a.chunk_stores && reinterpret_cast<uintptr_t>(addend) % 16 == 0;
    return prepare_mma_conv(c.y.dtype, &launch_);
  }
  Status run(const QueueContext& queue) override { return run_mma_conv(launch_, stream_of(queue)); }
  std::string implementation() const override {
    const MmaConvArgs& a = launch_.args;
    if (a.gated) return "strider-cuda:mma-conv+gate";
    return a.epilogue.activation != ConvActivation::kNone || a.addend_count ? "strider-cuda:mma-conv+program"
                                                                             : "strider-cuda:mma-conv";
  }

 private:
  MmaConvLaunch launch_;
  DeviceBuffer weights_, bias_;
};

// A convolution as the small product (small_gemm.h's SmallGemmWindow): output pixels of
// one image as M, output channels as N, C x KH x KW as K, A the im2col gathered as it is
// loaded; weights uploaded once as f32 [C * KH * KW][K], the bias as f32. For f32 at batch
// 1, where cuDNN's true-f32 kernels ran YOLOv8n's 3x3 layers on 10x10 and 20x20 maps at
// 0.3-1.7 TFLOP/s (25-48 us each on an H100): too few output tiles for 132 SMs, and no
// split of their 576-2304 long K. The small product's tiles and its K split over a
// cluster make 100-250 blocks of such a layer.
// Its weights and bias on the device, shared by the launches offered for one node.
struct SmallConvConstants {
  DeviceBuffer weights, bias;
  DeviceBuffer taps;  // the tiled convolution's (tiled_conv.h): where each input lies in x
};

// A launch of the small product or the tiled convolution over constants on the device that
// the kernels offered for one node share; `Run` enqueues it.
template <typename Launch, Status (*Run)(const Launch&, cudaStream_t)>
class ConstantsConv final : public Kernel {
 public:
  ConstantsConv(const Launch& launch, std::shared_ptr<const SmallConvConstants> constants, std::string implementation)
      : launch_(launch), constants_(std::move(constants)), implementation_(std::move(implementation)) {}
  Status run(const QueueContext& queue) override { return Run(launch_, stream_of(queue)); }
  std::string implementation() const override { return implementation_; }

 private:
  Launch launch_;
  std::shared_ptr<const SmallConvConstants> constants_;  // what launch_'s weights and bias point at
  std::string implementation_;
};
using SmallConv = ConstantsConv<SmallGemmLaunch, run_small_gemm>;
// The register-tiled f32 convolution (tiled_conv.h) over the small convolution's constants
// (the same [C * KH * KW][K] f32 weights), one kernel per tile size.
using TiledConv = ConstantsConv<TiledConvLaunch, run_tiled_conv>;

std::string small_conv_name(const SmallGemmArgs& a) {
  std::string text = fmt::format("strider-cuda:small-conv/{}rows", 8 * a.rows_per_thread);
  if (a.split > 1) text += fmt::format("-split{}", a.split);
  return a.epilogue.activation != ConvActivation::kNone ? text + "+program" : text;
}

std::string tiled_conv_name(const TiledConvLaunch& l) {
  const std::string text = fmt::format("strider-cuda:tiled-conv/{}", tiled_conv_tile_name(l.tile));
  return l.args.epilogue.activation != ConvActivation::kNone ? text + "+program" : text;
}

// Weights [N, C, KH, KW] as f32 [C * KH * KW][N] (row k of the product's B), the bias as f32.
Status upload_small_conv_constants(const Tensor& weights, const Tensor* bias, int64_t k, int64_t n,
                                   SmallConvConstants* out) {
  std::vector<float> w(size_t(k * n));
  for (int64_t o = 0; o < n; ++o)
    for (int64_t t = 0; t < k; ++t) w[size_t(t * n + o)] = float(weights.element_as_double(o * k + t));
  STRIDER_RETURN_IF_ERROR(out->weights.upload(std::as_bytes(std::span(w))));
  if (!bias) return Status::ok();
  const std::vector<float> b = bias_as_f32(bias, n, n);
  return out->bias.upload(std::as_bytes(std::span(b)));
}

// The small convolution's product geometry, or nullopt where it does not apply: f32, one
// group, at most kMaxSmallGemmOutputs outputs (beyond, cuDNN's tiles fill the GPU), x not
// in y's memory. Any strides: M's pixel is addressed through y's height and width strides.
std::optional<SmallGemmArgs> small_conv_geometry(const ConvSetup& c) {
  if (c.y.dtype != DType::kF32 || c.x.dtype != DType::kF32 || c.group != 1) return std::nullopt;
  if (c.y.num_elements() > kMaxSmallGemmOutputs || may_overlap(c.x, c.y)) return std::nullopt;
  const TensorView x = at_least_4d(c.x), y = at_least_4d(c.y);
  DirectConvArgs g;
  set_geometry(c, g);
  SmallGemmArgs a;
  a.m = g.oh * g.ow, a.n = int32_t(y.sizes[1]);
  const int64_t k = int64_t(g.c) * g.kh * g.kw;
  if (a.m < 1 || a.n < 1 || k < 1 || k >= int64_t(INT32_MAX)) return std::nullopt;
  a.k = int32_t(k);
  a.batch_dims = 1, a.batch_sizes[0] = g.n;
  a.a_batch[0] = x.strides[0], a.b_batch[0] = 0, a.out_batch[0] = y.strides[0];
  a.a = g.x, a.out = g.y;
  a.a_k_fastest = false;  // a warp's loads along the pixels: neighbouring addresses in NCHW
  a.b_row = a.n, a.b_col = 1, a.b_n_fastest = true;
  a.out_col = y.strides[1];
  SmallGemmWindow& w = a.window;
  w.taps = g.kh * g.kw, w.h = g.h, w.w = g.w, w.kw = g.kw;
  w.stride_h = g.stride_h, w.stride_w = g.stride_w, w.pad_h = g.pad_h, w.pad_w = g.pad_w;
  w.dilation_h = g.dilation_h, w.dilation_w = g.dilation_w;
  w.div_taps = make_fast_divisor(w.taps), w.div_kw = make_fast_divisor(w.kw), w.div_ow = make_fast_divisor(g.ow);
  w.x_c = x.strides[1], w.x_h = x.strides[2], w.x_w = x.strides[3];
  w.y_h = y.strides[2], w.y_w = y.strides[3];
  return a;
}

// Whether x and y are the 16-byte channel rows the tensor-core kernel takes, with a window
// of one row of taps (mma_conv.h's contract).
bool mma_conv_applies(const ConvSetup& c) {
  if (c.y.dtype != DType::kBF16 && c.y.dtype != DType::kF16) return false;
  const TensorView x = at_least_4d(c.x), y = at_least_4d(c.y);
  int64_t xn[4], xs[4], yn[4], ys[4];
  for (size_t i = 0; i < 4; ++i) xn[i] = x.sizes[i], xs[i] = x.strides[i], yn[i] = y.sizes[i], ys[i] = y.strides[i];
  if (!mma_conv_rows(xn, xs, x.byte_offset / dtype_size(x.dtype), 8) || !mma_conv_rows(yn, ys, 0, 1)) return false;
  if ((reinterpret_cast<uintptr_t>(x.allocation->address()) + uintptr_t(x.byte_offset)) % 16 != 0) return false;
  const WindowGeometry& g = c.window;
  if (g.kernel.size() == 2 && (g.kernel[0] != 1 || g.strides[0] != 1 || g.pads_begin[0] != 0 || g.pads_end[0] != 0))
    return false;
  return x.sizes[1] % 8 == 0 && g.kernel.back() <= kMaxMmaConvTaps;
}

}  // namespace

std::optional<KernelPtr> mma_conv_kernel(const ConvSetup& c, const KernelRequest& r,
                                         const std::vector<TensorView>& addends, bool gated) {
  if (!own_kernels_apply(c, r) || c.group != 1 || !mma_conv_applies(c)) return std::nullopt;
  if (addends.size() > size_t(kMaxMmaConvAddends)) return std::nullopt;
  for (const TensorView& v : addends)
    if (v.dtype != c.y.dtype || !has_layout_of(v, c.y)) return std::nullopt;
  auto kernel = std::make_unique<MmaConv>();
  if (!kernel->init(c, *r.constant_input(1), c.bias.allocation ? r.constant_input(2) : nullptr, addends, gated).is_ok())
    return std::nullopt;
  return KernelPtr(std::move(kernel));
}

std::vector<KernelPtr> depthwise_conv_kernels(const ConvSetup& c, const KernelRequest& r) {
  std::vector<KernelPtr> forms;
  const int64_t channels = c.x.sizes[1];
  if (!own_kernels_apply(c, r) || c.group != channels || c.group < 2 || c.y.sizes[1] != channels || c.w.sizes[1] != 1)
    return forms;
  for (bool vector : {true, false}) {
    auto kernel = std::make_unique<DepthwiseConv>();
    if (!kernel->init(c, *r.constant_input(1), c.bias.allocation ? r.constant_input(2) : nullptr, vector).is_ok() ||
        kernel->vector() != vector)
      continue;
    forms.push_back(std::move(kernel));
  }
  return forms;
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

std::vector<KernelPtr> small_conv_kernels(const ConvSetup& c, const KernelRequest& r) {
  std::vector<KernelPtr> kernels;
  if (const char* offer = std::getenv("STRIDER_CUDA_SMALL_GEMM"); offer && std::string_view(offer) == "0") return kernels;
  if (!own_kernels_apply(c, r)) return kernels;
  std::optional<SmallGemmArgs> args = small_conv_geometry(c);
  if (!args) return kernels;
  auto constants = std::make_shared<SmallConvConstants>();
  const Tensor* bias = c.bias.allocation ? r.constant_input(2) : nullptr;
  if (!upload_small_conv_constants(*r.constant_input(1), bias, args->k, args->n, constants.get()).is_ok()) return kernels;
  args->b = constants->weights.as<float>();
  args->bias = bias ? constants->bias.as<float>() : nullptr;
  args->epilogue = c.epilogue;
  for (const SmallGemmLaunch& launch : small_gemm_launches(*args, DType::kF32))
    kernels.push_back(std::make_unique<SmallConv>(launch, constants, small_conv_name(launch.args)));
  return kernels;
}

// Offered unless STRIDER_CUDA_TILED_CONV=off (for A/B timing): session 40's first GPU run
// passed the kernel suite's rows and took YOLOv8n b32 f32 from 5.27 to 4.76 ms on an H100.
std::vector<KernelPtr> tiled_conv_kernels(const ConvSetup& c, const KernelRequest& r) {
  std::vector<KernelPtr> kernels;
  if (const char* offer = std::getenv("STRIDER_CUDA_TILED_CONV"); offer && std::string_view(offer) == "off") return kernels;
  if (c.x.dtype != DType::kF32 || c.y.dtype != DType::kF32 || c.group != 1 || !own_kernels_apply(c, r) || may_overlap(c.x, c.y))
    return kernels;
  TiledConvLaunch launch;
  TiledConvArgs& a = launch.args;
  set_geometry(c, a);
  a.k = int32_t(c.y.sizes[1]);
  std::vector<TiledConvTap> taps;
  if (!make_tiled_conv_taps(a, &taps).is_ok()) return kernels;
  auto constants = std::make_shared<SmallConvConstants>();
  const Tensor* bias = c.bias.allocation ? r.constant_input(2) : nullptr;
  if (!upload_small_conv_constants(*r.constant_input(1), bias, int64_t(taps.size()), a.k, constants.get()).is_ok() ||
      !constants->taps.upload(std::as_bytes(std::span(taps))).is_ok())
    return kernels;
  a.weights = constants->weights.as<float>();
  a.bias = bias ? constants->bias.as<float>() : nullptr;
  a.taps = constants->taps.as<TiledConvTap>();
  for (TiledConvTile tile : {TiledConvTile::k128x128, TiledConvTile::k128x64, TiledConvTile::k64x64, TiledConvTile::k256x32,
                             TiledConvTile::k128x32}) {
    if (!prepare_tiled_conv(tile, &launch).is_ok()) return kernels;
    kernels.push_back(std::make_unique<TiledConv>(launch, constants, tiled_conv_name(launch)));
  }
  return kernels;
}

}  // namespace strider::cuda
