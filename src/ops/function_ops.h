// Ops ONNX defines as functions of other ops that strider runs by expansion
// (passes/expand_functions.h), besides Attention (ops/attention.h): their parameters,
// resolved once for shape inference and for the expansion.
#pragma once

#include <map>
#include <string>

#include "ops/op_registry.h"
#include "ops/shape_ops.h"

namespace strider {

// RotaryEmbedding (opset 23): X [B, H, S, D] or [B, S, N*D] (num_heads N), cos/sin caches
// [max_position, R/2] read at position_ids [B, S], or [B, S, R/2] without them; the first
// R = rotary_embedding_dim (0: D) elements of each head rotate, as halves or interleaved.
struct RotaryParams {
  bool three_d = false, interleaved = false, has_positions = false;
  int64_t batch = 0, heads = 0, len = 0, head = 0, rotary = 0;
};
Result<RotaryParams> resolve_rotary_embedding(const NodeInputs& node);

// LpNormalization: x / ||x||_p along `axis` (p 1 or 2); a vector of norm 0 stays 0.
struct LpNormParams {
  int64_t axis = 0, p = 2;
};
Result<LpNormParams> resolve_lp_normalization(const NodeInputs& node);

// OneHot: values[1] where an index (negative ones counting from depth) equals the position
// along the new axis, values[0] elsewhere; depth a constant.
struct OneHotParams {
  int64_t axis = 0;  // of the output, normalized
  int64_t depth = 0;
};
Result<OneHotParams> resolve_one_hot(const NodeInputs& node);

// Einsum: one term of index letters per input and the output's (explicit after "->", or
// the letters that appear once, alphabetically), "..." replaced by '0', '1', ... for the
// dims it covers (aligned from the right), and each letter's size (the largest over the
// inputs: a size 1 broadcasts). A letter twice in one term takes that term's diagonal.
struct EinsumParams {
  std::vector<std::string> terms;
  std::string output;
  std::map<char, int64_t> sizes;
};
Result<EinsumParams> resolve_einsum(const NodeInputs& node);

// NegativeLogLikelihoodLoss (input [N, C, d1..dk] of log-probabilities, target [N, d1..dk]
// of class indices, optional weight [C]) and SoftmaxCrossEntropyLoss (scores of the same
// shape; NLL of their LogSoftmax along C, which is its optional second output): the loss per
// element is -input[n, target, d..] * weight[target], 0 where target == ignore_index;
// reduced by "none" (shape of target), "sum" or "mean" (a scalar; mean divides by the sum of
// the weights taken, or the count of elements not ignored without weights).
struct LossParams {
  std::string reduction = "mean";
  bool has_ignore_index = false;
  int64_t ignore_index = 0;
  bool has_weight = false;
  int64_t classes = 0;
};
Result<LossParams> resolve_loss(const NodeInputs& node);

// DepthToSpace (mode DCR or CRD) and SpaceToDepth on [N, C, H, W] with `block`.
struct BlockParams {
  int64_t block = 0;
  bool crd = false;  // DepthToSpace: channels as (C', b, b), not (b, b, C')
  Shape out;
};
Result<BlockParams> resolve_depth_to_space(const NodeInputs& node);
Result<BlockParams> resolve_space_to_depth(const NodeInputs& node);

// CenterCropPad: each of `axes` (all by default) cropped or zero-padded, centred, to the
// size the constant `shape` input gives it; the begin side takes the smaller half.
struct CenterCropPadParams {
  std::vector<int64_t> axes, sizes;
  Shape out;
};
Result<CenterCropPadParams> resolve_center_crop_pad(const NodeInputs& node);

// MaxUnpool: X's values scattered to the flat positions I gives (MaxPool's indices, over
// the whole tensor) of a zero tensor [N, C, unpooled...], unpooled = (in - 1) * stride -
// pad_begin - pad_end + kernel per spatial dim; with output_shape, that tensor padded with
// zeros at the end of each dim to it (what the node tests' data says).
struct MaxUnpoolParams {
  Shape unpooled, out;
};
Result<MaxUnpoolParams> resolve_max_unpool(const NodeInputs& node);

// Col2Im: input [N, C * prod(block), L] holds, per channel and block position, the value at
// each of the L sliding-block places of an image [N, C, image...] (strides, dilations,
// pads as a convolution's); the output sums the values that land on each pixel.
struct Col2ImParams {
  Shape image, block, blocks;  // blocks: the block places along each dim (their product is L)
  std::vector<int64_t> strides, dilations, pads;  // pads: begins then ends
  int64_t channels = 0;
  Shape out;
};
Result<Col2ImParams> resolve_col2im(const NodeInputs& node);

// DeformConv (opset 19, 2-D): a convolution whose every tap reads X at its regular place
// moved by a learned offset (bilinear, zero outside), times an optional mask, with the
// offsets and mask given per offset group of input channels and per output position.
struct DeformConvParams {
  int64_t group = 1, offset_group = 1;
  std::vector<int64_t> kernel, strides, dilations, pads;  // pads: begins then ends
  Shape out;  // [N, out channels, out h, out w]
  bool has_bias = false, has_mask = false;
};
Result<DeformConvParams> resolve_deform_conv(const NodeInputs& node);

// ReverseSequence: along time_axis, the first sequence_lens[b] elements of batch index b
// reversed, the rest kept.
struct ReverseSequenceParams {
  int64_t batch_axis = 1, time_axis = 0;
};
Result<ReverseSequenceParams> resolve_reverse_sequence(const NodeInputs& node);

// EyeLike: a 2-D tensor of input 0's shape, 1 where column - row == k, else 0.
struct EyeLikeParams {
  DType dtype = DType::kF32;
  int64_t k = 0;
};
Result<EyeLikeParams> resolve_eye_like(const NodeInputs& node);

// Hardmax: 1 at the first maximum along `axis`, 0 elsewhere; before opset 13 over the
// input flattened to 2-D at `axis` (default 1), from 13 along `axis` (default -1).
struct HardmaxParams {
  int64_t axis = 0;  // normalized
  bool coerce = false;
};
Result<HardmaxParams> resolve_hardmax(const NodeInputs& node);

// LRN: x / (bias + alpha / size * sum of x^2 over channels [c - (size-1)/2, c + size/2])^beta.
struct LrnParams {
  float alpha = 1e-4f, beta = 0.75f, bias = 1.0f;
  int64_t size = 0;
};
Result<LrnParams> resolve_lrn(const NodeInputs& node);

// LpPool: (sum over the window of |x|^p)^(1/p), padding counting as zeros.
struct LpPoolParams {
  int64_t p = 2;
  Shape out;
  int64_t window_volume = 1;  // taps of one window (the kernel's)
};
Result<LpPoolParams> resolve_lp_pool(const NodeInputs& node);

// HannWindow, HammingWindow, BlackmanWindow of the constant `size`: a0 - a1 cos(2 pi n / D)
// + a2 cos(4 pi n / D), D = size (periodic, the default) or size - 1 (symmetric).
struct WindowParams {
  int64_t size = 0;
  bool periodic = true;
  DType dtype = DType::kF32;
  double a0 = 0, a1 = 0, a2 = 0;
};
Result<WindowParams> resolve_window_function(const NodeInputs& node);

// ConvTranspose over [N, C_in, d1..dk] with W [C_in, C_out / group, k1..kk]: per spatial
// dim the full size s (in - 1) + output_padding + (k - 1) dilation + 1 less the pads, which
// come from `pads`, auto_pad (SAME_*: out = in * s) or `output_shape` (total padding split
// by auto_pad's rule: SAME_UPPER puts the smaller half first, otherwise the larger).
struct ConvTransposeParams {
  int64_t group = 1;
  std::vector<int64_t> kernel, strides, dilations, pads_begin, pads_end, output_padding;
  Shape out;
};
Result<ConvTransposeParams> resolve_conv_transpose(const NodeInputs& node);

// DFT of a real ([..., 1]) or complex ([..., 2]) signal along `axis` (an attribute before
// opset 20, a constant input from 20; never the last dim), over `length` samples (the
// dft_length input, else the signal's, else for a one-sided inverse 2 (n - 1)): the signal
// cut or zero-padded to it. Forward: `bins` = length, or length / 2 + 1 one-sided. Inverse:
// scaled by 1 / length; one-sided, its input is the first bins of a Hermitian spectrum and
// its output real ([..., 1]).
struct DftParams {
  int64_t axis = 1, length = 0, bins = 0, used = 0;  // used: input samples (or bins) that count
  bool inverse = false, onesided = false, complex_input = false;
  Shape out;
};
Result<DftParams> resolve_dft(const NodeInputs& node);

// STFT of signal [batch, length, 1|2]: frames of frame_length samples (the constant input
// 3, else the window's length) every frame_step (constant input 1), each multiplied by the
// window (input 2, optional) and transformed (one-sided by default): [batch, frames, bins, 2].
struct StftParams {
  int64_t step = 1, frames = 0;
  DftParams dft;  // of one frame: axis 2 of [batch, frames, frame_length, parts]
  bool windowed = false;
  Shape out;
};
Result<StftParams> resolve_stft(const NodeInputs& node);

void register_function_ops(std::vector<OpSchema>& ops);

}  // namespace strider
