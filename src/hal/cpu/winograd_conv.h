// Winograd convolution F(4x4, 3x3) for f32 3x3 stride-1 convolutions over channels-inner views.
//
// Why: a YOLOv8-style detector spends over half its CPU time in 3x3 stride-1 convolutions
// that oneDNN's direct kernel (brgconv) already runs near the core's multiply-add rate, so
// the only way to be faster is fewer multiplies. F(4x4, 3x3) computes a 4x4 output tile from
// a 6x6 input tile with 36 multiplies per channel pair instead of 144 (Lavin & Gray, "Fast
// Algorithms for Convolutional Neural Networks", 2016). oneDNN 2.6 has Winograd only on its
// blocked nChw16c layout, which strided channel slices (an in-place concat) cannot express;
// this kernel reads and writes the plan's views where they lie.
//
// How: for a chunk of tiles, the input transform B^T d B turns each tile's 6x6 patch of
// channel vectors into 36 rows (one per transform point), the 36 products with the weights
// transformed once at creation (G g G^T, in double) are one batched oneDNN matmul, and the
// output transform A^T m A, the bias and a one-input activation (ReLU, sigmoid, SiLU) write
// the 4x4 outputs into y. Chunks are independent: the team splits them (or, for maps of few
// tiles, the output channels). Scratch: each thread's own, shared by every Winograd kernel
// that thread runs and grown to the largest layer's need (a kernel workspace, like oneDNN's
// scratchpads: outside the plan's bytes), so it is in cache when the next layer runs. The
// transformed weights (four times the direct kernel's) belong to the kernel.
//
// Views: x and y must have unit channel stride (channels-last or a channel slice of one);
// any other strides (rows, pixels, batch) are read as they are. Positions outside x are
// the convolution's zero padding. Only y's elements are written. Numerics: the transforms
// add and subtract with weights up to 8 (points 0, +-1, +-2), so rounding error grows over
// the direct sum: against float64, 2-6e-6 of the output's largest magnitude on YOLOv8n's
// shapes, 4-6x oneDNN's direct kernel (bench/winograd_bench prints both), well inside the
// f32 tolerance every kernel is held to.
#pragma once

#include <memory>
#include <optional>

#include "hal/kernel.h"
#include "memory/tensor_view.h"

namespace strider::cpu {

// Whether kernels created on this thread may be Winograd ones: the device sets it around
// kernel creation from DeviceOptions::cpu_winograd (SessionOptions::winograd).
inline thread_local bool thread_allows_winograd = true;

// What the kernel applies after the bias, in its output transform.
enum class WinogradActivation { kNone, kRelu, kSigmoid, kSilu };

struct WinogradConvArgs {
  TensorView x, y;                     // [N, C, H, W] and [N, K, P, Q], unit channel stride
  const float* weights = nullptr;      // [K, C, 3, 3] constant weights, with...
  Strides weight_strides;              // ...these element strides
  std::optional<TensorView> bias;      // [K]
  int64_t pad_top = 0, pad_left = 0;   // the bottom and right pads follow from y's size
  WinogradActivation activation = WinogradActivation::kNone;
};

// Whether the Winograd kernel serves a convolution of this geometry and is expected to be
// faster than the direct one (enough channels for its products to run well; measured by
// bench/winograd_bench).
bool winograd_conv_pays(int64_t in_channels, int64_t out_channels, int64_t out_height, int64_t out_width);

// The kernel, or UNSUPPORTED when the views are not channels-inner or oneDNN refuses the
// batched product. `node` names the node in errors.
Result<std::unique_ptr<Kernel>> make_winograd_conv(const WinogradConvArgs& args, const std::string& node);

}  // namespace strider::cpu
