// DFT and STFT as MatMuls with constant cosine and sine tables (ops/function_ops.h has its meaning):
// the signal axis moved last among the signal dims, the real and imaginary parts taken
// apart, re = x_re C_re + x_im S_re and im = x_re C_im + x_im S_im with [used, bins] tables
// that also cut or zero-pad the signal to dft_length (rows past `used` are left out) and
// scale the inverse, then the parts put back together and the axis moved home. Every
// device's MatMul runs it: O(n^2) per signal, which is what a DFT of these sizes costs on
// tensor units anyway; there is no FFT.
#include <cmath>
#include <numbers>

#include "ops/function_ops.h"
#include "passes/body_writer.h"

namespace strider::expansion {
namespace {

// The four tables, in double, as float vectors [used, bins]: how input sample (or bin) j
// feeds output bin (or sample) k through the real and the imaginary part.
struct Tables {
  std::vector<float> re_from_re, re_from_im, im_from_re, im_from_im;
};
Tables dft_tables(const DftParams& p) {
  Tables t;
  const double turn = 2 * std::numbers::pi / double(p.length), scale = p.inverse ? 1.0 / double(p.length) : 1.0;
  const double sign = p.inverse ? 1.0 : -1.0;  // e^{sign i 2 pi j k / length}
  for (int64_t j = 0; j < p.used; ++j)
    for (int64_t k = 0; k < p.bins; ++k) {
      const double angle = turn * double((j * k) % p.length);
      // A one-sided inverse's bin j stands for itself and its mirror length - j too.
      const double weight = p.inverse && p.onesided && j != 0 && 2 * j != p.length ? 2.0 : 1.0;
      const double c = std::cos(angle) * scale * weight, s = std::sin(angle) * sign * scale * weight;
      t.re_from_re.push_back(float(c));
      t.re_from_im.push_back(float(-s));
      t.im_from_re.push_back(float(s));
      t.im_from_im.push_back(float(c));
    }
  return t;
}

Result<ValueId> transform_last_signal_axis(BodyWriter& w, ValueId y, const DftParams& p, DType dtype, ValueId into);

}  // namespace

Status expand_dft(Graph& g, const Node& node, MemoryBudget* budget) {
  STRIDER_ASSIGN_OR_RETURN(DftParams p, resolve_dft(NodeInputs(g, node)));
  BodyWriter w(g, node, budget);
  w.at_least_opset(13);
  const Shape x = g.value(node.inputs[0]).shape;  // a copy: the body adds values
  const DType dtype = g.value(node.inputs[0]).dtype;
  const int64_t rank = int64_t(x.size()), last_signal = rank - 2;
  STRIDER_RETURN_IF_ERROR(w.reserve(4 * p.used * p.bins, dtype, "the DFT tables"));
  std::vector<int64_t> perm;  // swaps the axis with the last signal dim (its own inverse)
  for (int64_t d = 0; d < rank; ++d) perm.push_back(d == p.axis ? last_signal : d == last_signal ? p.axis : d);
  ValueId y = node.inputs[0];
  if (p.axis != last_signal) {
    STRIDER_ASSIGN_OR_RETURN(y, w.op("Transpose", {y}, ints_attr("perm", perm)));
  }
  // [..., used, parts]: the samples that count.
  STRIDER_ASSIGN_OR_RETURN(ValueId zero, w.ints({0}));
  STRIDER_ASSIGN_OR_RETURN(ValueId used, w.ints({p.used}));
  STRIDER_ASSIGN_OR_RETURN(ValueId axis, w.ints({last_signal}));
  STRIDER_ASSIGN_OR_RETURN(y, w.op("Slice", {y, zero, used, axis}));
  const bool moved = p.axis != last_signal;
  STRIDER_ASSIGN_OR_RETURN(y, transform_last_signal_axis(w, y, p, dtype, moved ? kNoValue : node.outputs[0]));
  if (!moved) return Status::ok();
  return w.op("Transpose", {y}, ints_attr("perm", perm), node.outputs[0]).status();
}

// Frames gathered by a constant index table, windowed, then transformed along axis 2.
Status expand_stft(Graph& g, const Node& node, MemoryBudget* budget) {
  STRIDER_ASSIGN_OR_RETURN(StftParams p, resolve_stft(NodeInputs(g, node)));
  BodyWriter w(g, node, budget);
  w.at_least_opset(13);
  const DType dtype = g.value(node.inputs[0]).dtype;
  const int64_t length = p.dft.length;
  STRIDER_RETURN_IF_ERROR(w.reserve(p.frames * length, DType::kI64, "the frame positions"));
  STRIDER_RETURN_IF_ERROR(w.reserve(4 * length * p.dft.bins, dtype, "the DFT tables"));
  std::vector<int64_t> positions;
  for (int64_t f = 0; f < p.frames; ++f)
    for (int64_t j = 0; j < length; ++j) positions.push_back(f * p.step + j);
  STRIDER_ASSIGN_OR_RETURN(ValueId at, w.constant(Tensor::from_values<int64_t>(DType::kI64, {p.frames, length}, positions)));
  STRIDER_ASSIGN_OR_RETURN(ValueId y, w.op("Gather", {node.inputs[0], at}, int_attr("axis", 1)));
  if (p.windowed) {
    STRIDER_ASSIGN_OR_RETURN(ValueId column, w.ints({length, 1}));
    STRIDER_ASSIGN_OR_RETURN(ValueId window, w.op("Reshape", {node.inputs[2], column}));
    STRIDER_ASSIGN_OR_RETURN(y, w.op("Mul", {y, window}));
  }
  return transform_last_signal_axis(w, y, p.dft, dtype, node.outputs[0]).status();
}

namespace {

// y: [..., used, parts] with the signal axis last but one: the transform, into `into`
// (or a new value).
Result<ValueId> transform_last_signal_axis(BodyWriter& w, ValueId y, const DftParams& p, DType dtype, ValueId into) {
  const Tables t = dft_tables(p);
  const Shape table{p.used, p.bins};
  auto part = [&](int64_t index) -> Result<ValueId> {
    STRIDER_ASSIGN_OR_RETURN(ValueId at, w.constant(Tensor::from_values<int64_t>(DType::kI64, {}, std::vector<int64_t>{index})));
    return w.op("Gather", {y, at}, int_attr("axis", -1));
  };
  auto times = [&](ValueId signal, const std::vector<float>& values) -> Result<ValueId> {
    STRIDER_ASSIGN_OR_RETURN(ValueId matrix, w.floats(dtype, table, values));
    return w.op("MatMul", {signal, matrix});
  };
  STRIDER_ASSIGN_OR_RETURN(ValueId x_re, part(0));
  ValueId x_im = kNoValue;
  if (p.complex_input) {
    STRIDER_ASSIGN_OR_RETURN(x_im, part(1));
  }
  std::vector<ValueId> parts;
  for (int which = 0; which < (p.inverse && p.onesided ? 1 : 2); ++which) {
    STRIDER_ASSIGN_OR_RETURN(ValueId sum, times(x_re, which == 0 ? t.re_from_re : t.im_from_re));
    if (p.complex_input) {
      STRIDER_ASSIGN_OR_RETURN(ValueId from_im, times(x_im, which == 0 ? t.re_from_im : t.im_from_im));
      STRIDER_ASSIGN_OR_RETURN(sum, w.op("Add", {sum, from_im}));
    }
    STRIDER_ASSIGN_OR_RETURN(ValueId minus_one, w.ints({-1}));
    STRIDER_ASSIGN_OR_RETURN(ValueId unsqueezed, w.op("Unsqueeze", {sum, minus_one}));
    parts.push_back(unsqueezed);
  }
  if (parts.size() == 1) return w.op("Identity", {parts[0]}, {}, into);
  return w.op("Concat", parts, int_attr("axis", -1), into);
}

}  // namespace

}  // namespace strider::expansion
