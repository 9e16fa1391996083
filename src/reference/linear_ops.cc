// MatMul (numpy semantics), Gemm and Conv (1-D to 3-D and beyond, grouped, dilated,
// strided, padded), accumulated in double (int64 for integer MatMul); MatMulInteger,
// ConvInteger and QLinearConv as those over centred (and scaled) operands.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <numbers>

#include "base/shape.h"
#include "reference/op_support.h"
#include "reference/window.h"

namespace strider::ref {
namespace {

Status require_not_bool(const RefTensor& t, std::string_view what) {
  if (t.dtype != DType::kBool) return Status::ok();
  return invalid_model(fmt::format("{} is bool, expected a numeric type", what));
}

// The product of matrices a_offset.. (m x k) and b_offset.. (k x n), written at out_offset.
void matrix_product(const RefTensor& a, int64_t a_offset, const RefTensor& b, int64_t b_offset,
                    int64_t m, int64_t k, int64_t n, RefTensor& out, int64_t out_offset) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      size_t o = size_t(out_offset + i * n + j);
      if (out.is_floating()) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p)
          sum += a.floats[size_t(a_offset + i * k + p)] * b.floats[size_t(b_offset + p * n + j)];
        out.floats[o] = sum;
      } else {
        int64_t sum = 0;
        for (int64_t p = 0; p < k; ++p)
          sum = wrapping_add(sum, wrapping_mul(a.ints[size_t(a_offset + i * k + p)],
                                               b.ints[size_t(b_offset + p * n + j)]));
        out.ints[o] = wrap_to_dtype(sum, out.dtype);
      }
    }
  }
}

// numpy matmul: a 1-D A is a row vector, a 1-D B a column vector (their unit dims are
// dropped from the output); leading batch dims broadcast.
Result<OpOutputs> matmul_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* a, ctx.input(0, "A"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* b, ctx.input(1, "B"));
  STRIDER_RETURN_IF_ERROR(require_not_bool(*a, "input 0 (A)"));
  STRIDER_RETURN_IF_ERROR(require_same_dtype(*a, *b, "input 0 (A)", "input 1 (B)"));
  if (a->rank() == 0 || b->rank() == 0) return invalid_model("MatMul inputs must have rank >= 1");
  Shape sa = a->shape, sb = b->shape;
  bool a_vector = sa.size() == 1, b_vector = sb.size() == 1;
  if (a_vector) sa.insert(sa.begin(), 1);
  if (b_vector) sb.push_back(1);
  int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
  if (sb[sb.size() - 2] != k)
    return invalid_argument(fmt::format("inner dims differ: A is {}, B is {}",
                                        shape_to_string(a->shape), shape_to_string(b->shape)));
  Shape batch_a(sa.begin(), sa.end() - 2), batch_b(sb.begin(), sb.end() - 2);
  STRIDER_ASSIGN_OR_RETURN(Shape batch, broadcast_or_error(batch_a, batch_b));
  std::vector<int64_t> from_a = broadcast_source_index(batch_a, batch);
  std::vector<int64_t> from_b = broadcast_source_index(batch_b, batch);
  Shape out_shape = batch;
  if (!a_vector) out_shape.push_back(m);
  if (!b_vector) out_shape.push_back(n);
  RefTensor out = RefTensor::zeros(a->dtype, out_shape);
  for (size_t i = 0; i < from_a.size(); ++i)
    matrix_product(*a, from_a[i] * m * k, *b, from_b[i] * k * n, m, k, n, out, int64_t(i) * m * n);
  return OpOutputs{std::move(out)};
}

// Y = alpha * A' B' + beta * C, with C (optional from opset 11) broadcast to (M, N).
Result<OpOutputs> gemm_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* a, ctx.input(0, "A"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* b, ctx.input(1, "B"));
  const RefTensor* c = ctx.optional_input(2);
  if (!a->is_floating())
    return unsupported(
        fmt::format("Gemm on {} is not supported (floating types only)", dtype_name(a->dtype)));
  STRIDER_RETURN_IF_ERROR(require_same_dtype(*a, *b, "input 0 (A)", "input 1 (B)"));
  if (c != nullptr)
    STRIDER_RETURN_IF_ERROR(require_same_dtype(*a, *c, "input 0 (A)", "input 2 (C)"));
  if (a->rank() != 2 || b->rank() != 2)
    return invalid_argument(fmt::format("A {} and B {} must be matrices", shape_to_string(a->shape),
                                        shape_to_string(b->shape)));
  const AttributeMap& attrs = ctx.attributes();
  STRIDER_ASSIGN_OR_RETURN(double alpha, attrs.get_float("alpha", 1.0f));
  STRIDER_ASSIGN_OR_RETURN(double beta, attrs.get_float("beta", 1.0f));
  STRIDER_ASSIGN_OR_RETURN(int64_t trans_a, attrs.get_int("transA", 0));
  STRIDER_ASSIGN_OR_RETURN(int64_t trans_b, attrs.get_int("transB", 0));
  int64_t m = trans_a ? a->shape[1] : a->shape[0], k = trans_a ? a->shape[0] : a->shape[1];
  int64_t kb = trans_b ? b->shape[1] : b->shape[0], n = trans_b ? b->shape[0] : b->shape[1];
  if (k != kb)
    return invalid_argument(
        fmt::format("inner dims differ: A' has {} columns, B' has {} rows", k, kb));
  Shape out_shape = {m, n};
  std::vector<int64_t> from_c;
  if (c != nullptr) {
    Shape broadcast;
    if (!broadcast_shapes(c->shape, out_shape, &broadcast) || broadcast != out_shape)
      return invalid_argument(fmt::format("C {} does not broadcast to {}",
                                          shape_to_string(c->shape), shape_to_string(out_shape)));
    from_c = broadcast_source_index(c->shape, out_shape);
  }
  RefTensor y = RefTensor::zeros(a->dtype, out_shape);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) {
        double av = a->floats[size_t(trans_a ? p * m + i : i * k + p)];
        double bv = b->floats[size_t(trans_b ? j * k + p : p * n + j)];
        sum += av * bv;
      }
      size_t o = size_t(i * n + j);
      y.floats[o] = alpha * sum + (c != nullptr ? beta * c->floats[size_t(from_c[o])] : 0.0);
    }
  }
  return OpOutputs{std::move(y)};
}

// The (kernel tap, input spatial offset) pairs of one output position that read inside
// the input (taps in the padding contribute zero and are left out).
struct WindowTap {
  int64_t kernel_offset;
  int64_t input_offset;
};

std::vector<WindowTap> taps_of(const WindowGeometry& g, const std::vector<int64_t>& out_index) {
  std::vector<WindowTap> taps;
  Strides in_strides = contiguous_strides(g.input);
  for_each_index(g.kernel, [&](int64_t kernel_offset, const std::vector<int64_t>& k) {
    int64_t input_offset = 0;
    for (size_t axis = 0; axis < k.size(); ++axis) {
      int64_t coordinate = g.input_coordinate(axis, out_index[axis], k[axis]);
      if (coordinate < 0 || coordinate >= g.input[axis]) return;
      input_offset += coordinate * in_strides[axis];
    }
    taps.push_back({kernel_offset, input_offset});
  });
  return taps;
}

struct ConvShapes {
  int64_t batch, in_channels, out_channels, group;
  Shape spatial, kernel;
};

Result<ConvShapes> conv_shapes(const OpContext& ctx, const RefTensor& x, const RefTensor& w,
                               const RefTensor* bias) {
  if (x.rank() < 3 || w.rank() != x.rank())
    return invalid_argument(fmt::format("X {} and W {} must have the same rank, at least 3",
                                        shape_to_string(x.shape), shape_to_string(w.shape)));
  ConvShapes s;
  STRIDER_ASSIGN_OR_RETURN(s.group, ctx.attributes().get_int("group", 1));
  s.batch = x.shape[0];
  s.in_channels = x.shape[1];
  s.out_channels = w.shape[0];
  s.spatial.assign(x.shape.begin() + 2, x.shape.end());
  s.kernel.assign(w.shape.begin() + 2, w.shape.end());
  if (s.group < 1 || s.in_channels != w.shape[1] * s.group || s.out_channels % s.group != 0)
    return invalid_argument(fmt::format("X {} and W {} do not fit group {}",
                                        shape_to_string(x.shape), shape_to_string(w.shape),
                                        s.group));
  if (bias != nullptr && (bias->rank() != 1 || bias->shape[0] != s.out_channels))
    return invalid_argument(
        fmt::format("B {} must have {} elements", shape_to_string(bias->shape), s.out_channels));
  return s;
}

Result<OpOutputs> conv_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "X"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* w, ctx.input(1, "W"));
  const RefTensor* bias = ctx.optional_input(2);
  STRIDER_RETURN_IF_ERROR(require_floating(*x, "input 0 (X)"));
  STRIDER_RETURN_IF_ERROR(require_same_dtype(*x, *w, "input 0 (X)", "input 1 (W)"));
  if (bias != nullptr)
    STRIDER_RETURN_IF_ERROR(require_same_dtype(*x, *bias, "input 0 (X)", "input 2 (B)"));
  STRIDER_ASSIGN_OR_RETURN(ConvShapes s, conv_shapes(ctx, *x, *w, bias));
  WindowOptions options;
  options.kernel_from_weights = s.kernel;
  STRIDER_ASSIGN_OR_RETURN(WindowGeometry g, window_geometry(ctx.attributes(), s.spatial, options));
  Shape out_shape = {s.batch, s.out_channels};
  out_shape.insert(out_shape.end(), g.output.begin(), g.output.end());
  STRIDER_RETURN_IF_ERROR(checked_element_count(out_shape, "output shape"));
  RefTensor y = RefTensor::zeros(x->dtype, out_shape);
  int64_t in_size = num_elements(s.spatial), out_size = num_elements(g.output);
  int64_t kernel_size = num_elements(s.kernel);
  int64_t group_in = s.in_channels / s.group, group_out = s.out_channels / s.group;
  for (int64_t n = 0; n < s.batch; ++n) {
    for_each_index(g.output, [&](int64_t position, const std::vector<int64_t>& out_index) {
      std::vector<WindowTap> taps = taps_of(g, out_index);
      for (int64_t oc = 0; oc < s.out_channels; ++oc) {
        int64_t first_ic = (oc / group_out) * group_in;
        double sum = bias != nullptr ? bias->floats[size_t(oc)] : 0.0;
        for (int64_t ic = 0; ic < group_in; ++ic) {
          // data() + offset, not &floats[offset]: an empty X (a spatial size of 0, padded
          // to a non-empty output) has no element to take the address of.
          const double* xp = x->floats.data() + (n * s.in_channels + first_ic + ic) * in_size;
          const double* wp = w->floats.data() + (oc * group_in + ic) * kernel_size;
          for (const WindowTap& t : taps) sum += xp[t.input_offset] * wp[t.kernel_offset];
        }
        y.floats[size_t((n * s.out_channels + oc) * out_size + position)] = sum;
      }
    });
  }
  return OpOutputs{std::move(y)};
}

// ---- the integer and quantized forms: centred (and scaled) operands, then the float op ----

// (v - zero_point) * scale as f64, the zero point and scale one value or one per index of
// `axis` (scale may be null: 1); an error naming `what` when v is not an integer tensor with
// that axis or a parameter does not fit it.
Result<RefTensor> centred(const RefTensor& v, const RefTensor* zero_point, const RefTensor* scale, int64_t axis,
                          std::string_view what) {
  STRIDER_RETURN_IF_ERROR(require_integer(v, what));
  if (axis >= v.rank()) return invalid_model(fmt::format("{} is {}, it has no axis {}", what, describe(v), axis));
  const int64_t inner = product(v.shape, size_t(axis) + 1, v.shape.size()), along = v.shape[size_t(axis)];
  STRIDER_RETURN_IF_ERROR(require_quant_param(zero_point, QuantParam::kZeroPoint, along, fmt::format("{}'s zero point", what)));
  STRIDER_RETURN_IF_ERROR(require_quant_param(scale, QuantParam::kScale, along, fmt::format("{}'s scale", what)));
  RefTensor out = RefTensor::zeros(DType::kF64, v.shape);
  for (int64_t i = 0; i < v.num_elements(); ++i) {
    const int64_t k = (i / inner) % along;
    const double zp = zero_point ? double(zero_point->ints[size_t(zero_point->num_elements() == 1 ? 0 : k)]) : 0.0;
    const double s = scale ? scale->floats[size_t(scale->num_elements() == 1 ? 0 : k)] : 1.0;
    out.floats[size_t(i)] = (double(v.ints[size_t(i)]) - zp) * s;
  }
  return out;
}

Result<RefTensor> integer_input(const OpContext& ctx, size_t i, std::string_view name) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* t, ctx.input(i, name));
  STRIDER_RETURN_IF_ERROR(require_integer(*t, fmt::format("input {} ({})", i, name)));
  return *t;
}

// The exact sums as int32 (double holds them exactly: 2^53 is far above any int8 product sum).
RefTensor as_int32(const RefTensor& y) {
  RefTensor out = RefTensor::zeros(DType::kI32, y.shape);
  for (size_t i = 0; i < y.floats.size(); ++i) out.ints[i] = wrap_to_dtype(truncate_to_int(y.floats[i]), DType::kI32);
  return out;
}

Result<OpOutputs> matmul_integer_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(RefTensor a, integer_input(ctx, 0, "A"));
  STRIDER_ASSIGN_OR_RETURN(RefTensor b, integer_input(ctx, 1, "B"));
  if (a.rank() < 2 || b.rank() < 2) return unsupported("MatMulInteger of vectors");
  STRIDER_ASSIGN_OR_RETURN(const RefTensor af, centred(a, ctx.optional_input(2), nullptr, a.rank() - 2, "input 0 (A)"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor bf, centred(b, ctx.optional_input(3), nullptr, b.rank() - 1, "input 1 (B)"));
  STRIDER_ASSIGN_OR_RETURN(OpOutputs y, matmul_op(OpContext(ctx.node(), {&af, &bf})));
  return OpOutputs{as_int32(y[0])};
}

Result<OpOutputs> conv_integer_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(RefTensor x, integer_input(ctx, 0, "x"));
  STRIDER_ASSIGN_OR_RETURN(RefTensor w, integer_input(ctx, 1, "w"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor xf, centred(x, ctx.optional_input(2), nullptr, 1, "input 0 (x)"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor wf, centred(w, ctx.optional_input(3), nullptr, 0, "input 1 (w)"));
  STRIDER_ASSIGN_OR_RETURN(OpOutputs y, conv_op(OpContext(ctx.node(), {&xf, &wf})));
  return OpOutputs{as_int32(y[0])};
}

// Dequantized x and w (w per output channel), the int32 bias scaled by x_scale * w_scale,
// the float conv, then saturate(round_half_even(y / y_scale) + y_zero_point).
Result<OpOutputs> qlinear_conv_op(const OpContext& ctx) {
  std::vector<const RefTensor*> in(8);
  for (size_t i = 0; i < 8; ++i) {
    STRIDER_ASSIGN_OR_RETURN(in[i], ctx.input(i, fmt::format("input {}", i)));
  }
  STRIDER_RETURN_IF_ERROR(require_quant_param(in[1], QuantParam::kScale, 1, "input 1 (x_scale)"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor xf, centred(*in[0], in[2], in[1], 1, "input 0 (x)"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor wf, centred(*in[3], in[5], in[4], 0, "input 3 (w)"));
  STRIDER_RETURN_IF_ERROR(require_quant_param(in[6], QuantParam::kScale, 1, "input 6 (y_scale)"));
  STRIDER_RETURN_IF_ERROR(require_quant_param(in[7], QuantParam::kZeroPoint, 1, "input 7 (y_zero_point)"));
  std::vector<const RefTensor*> conv_inputs{&xf, &wf};
  RefTensor bias;
  if (const RefTensor* b = ctx.optional_input(8)) {
    STRIDER_RETURN_IF_ERROR(require_integer(*b, "input 8 (B)"));
    if (b->rank() != 1 || b->shape[0] != in[3]->shape[0])
      return invalid_model(fmt::format("input 8 (B) is {}, expected {} values", describe(*b), in[3]->shape[0]));
    bias = RefTensor::zeros(DType::kF64, b->shape);
    for (int64_t c = 0; c < b->num_elements(); ++c)
      bias.floats[size_t(c)] = double(b->ints[size_t(c)]) * in[1]->floats[0] * in[4]->floats[size_t(in[4]->num_elements() == 1 ? 0 : c)];
    conv_inputs.push_back(&bias);
  }
  STRIDER_ASSIGN_OR_RETURN(OpOutputs y, conv_op(OpContext(ctx.node(), conv_inputs)));
  RefTensor q = RefTensor::zeros(in[7]->dtype, y[0].shape);
  for (size_t i = 0; i < q.ints.size(); ++i) {
    const double v = std::nearbyint(y[0].floats[i] / in[6]->floats[0]) + double(in[7]->ints[0]);
    q.ints[i] = saturate_to_dtype(v, q.dtype);
  }
  return OpOutputs{std::move(q)};
}

// ConvTranspose by scattering: input position p of a spatial dim feeds output position
// p s + k d - pad_begin through tap k. Pads from `pads`, auto_pad (SAME_*: out = in s) or
// output_shape (the total split with floor division, as the ONNX definition writes it).
Result<OpOutputs> conv_transpose_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "X"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* w, ctx.input(1, "W"));
  const RefTensor* b = ctx.optional_input(2);
  const AttributeMap& attrs = ctx.attributes();
  const int64_t dims = x->rank() - 2;
  STRIDER_ASSIGN_OR_RETURN(int64_t group, attrs.get_int("group", 1));
  if (dims < 1 || w->rank() != x->rank() || group < 1 || w->shape[0] != x->shape[1] || x->shape[1] % group != 0)
    return invalid_model(fmt::format("X {}, W {} and group {} do not fit", describe(*x), describe(*w), group));
  const size_t n = size_t(dims);
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> strides, attrs.get_ints("strides", std::vector<int64_t>(n, 1)));
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> dilations, attrs.get_ints("dilations", std::vector<int64_t>(n, 1)));
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> extra, attrs.get_ints("output_padding", std::vector<int64_t>(n, 0)));
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> pads, attrs.get_ints("pads", std::vector<int64_t>(2 * n, 0)));
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> wanted, attrs.get_ints("output_shape", {}));
  STRIDER_ASSIGN_OR_RETURN(std::string auto_pad, attrs.get_string("auto_pad", "NOTSET"));
  if (wanted.size() == n + 2) wanted.erase(wanted.begin(), wanted.begin() + 2);
  if (strides.size() != n || dilations.size() != n || extra.size() != n || pads.size() != 2 * n ||
      (!wanted.empty() && wanted.size() != n))
    return invalid_model("ConvTranspose attributes do not match the spatial dims");
  const int64_t c_in = x->shape[1], c_out_group = w->shape[1], c_in_group = c_in / group;
  Shape out_shape{x->shape[0], c_out_group * group};
  for (size_t i = 0; i < n; ++i) {
    const int64_t in = x->shape[2 + i], k = w->shape[2 + i];
    const int64_t full = strides[i] * (in - 1) + extra[i] + (k - 1) * dilations[i] + 1;
    if (!wanted.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t total = full - (wanted.empty() ? in * strides[i] : wanted[i]);
      const int64_t half = int64_t(std::floor(double(total) / 2));
      pads[i] = auto_pad == "SAME_UPPER" ? half : total - half;
      pads[i + n] = total - pads[i];
    } else if (auto_pad == "VALID") {
      pads[i] = pads[i + n] = 0;
    }
    out_shape.push_back(full - pads[i] - pads[i + n]);
    if (out_shape.back() < 1) return invalid_model("ConvTranspose output would be empty");
  }
  RefTensor y = RefTensor::zeros(x->dtype, out_shape);
  if (y.num_elements() == 0) return OpOutputs{std::move(y)};
  const int64_t out_volume = y.num_elements() / (out_shape[0] * out_shape[1]);
  // An empty X (no channels or no positions) scatters nothing: Y is the bias alone.
  const bool scatters = x->num_elements() > 0;
  const int64_t in_volume = scatters ? x->num_elements() / (x->shape[0] * c_in) : 0;
  const int64_t taps = scatters ? w->num_elements() / (c_in * c_out_group) : 0;
  for (int64_t batch = 0; scatters && batch < x->shape[0]; ++batch)
    for (int64_t ci = 0; ci < c_in; ++ci)
      for (int64_t p = 0; p < in_volume; ++p)
        for (int64_t co = 0; co < c_out_group; ++co)
          for (int64_t t = 0; t < taps; ++t) {
            int64_t at = 0, rest_p = p, rest_t = t, scale_out = 1;
            bool inside = true;
            for (size_t i = n; i-- > 0;) {  // the output position of input p through tap t
              const int64_t pi = rest_p % x->shape[2 + i], ti = rest_t % w->shape[2 + i];
              rest_p /= x->shape[2 + i];
              rest_t /= w->shape[2 + i];
              const int64_t o = pi * strides[i] + ti * dilations[i] - pads[i];
              inside = inside && o >= 0 && o < out_shape[2 + i];
              at += o * scale_out;
              scale_out *= out_shape[2 + i];
            }
            if (!inside) continue;
            const int64_t channel = (ci / c_in_group) * c_out_group + co;
            y.floats[size_t((batch * out_shape[1] + channel) * out_volume + at)] +=
                x->floats[size_t((batch * c_in + ci) * in_volume + p)] * w->floats[size_t((ci * c_out_group + co) * taps + t)];
          }
  if (b)
    for (size_t e = 0; e < y.floats.size(); ++e) y.floats[e] += b->floats[size_t(int64_t(e) / out_volume % out_shape[1])];
  return OpOutputs{std::move(y)};
}

// DFT by the definition, in double: X_k = sum_j x_j e^{-+ 2 pi i j k / L} over the signal
// cut or zero-padded to L; the inverse divides by L; a one-sided inverse rebuilds the
// mirrored half of its Hermitian input and returns the real part.
Result<OpOutputs> dft_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "input"));
  const int64_t rank = x->rank();
  if (rank < 2 || (x->shape.back() != 1 && x->shape.back() != 2)) return invalid_model("input must be [..., 1|2]");
  STRIDER_ASSIGN_OR_RETURN(int64_t inverse, ctx.attributes().get_int("inverse", 0));
  STRIDER_ASSIGN_OR_RETURN(int64_t onesided, ctx.attributes().get_int("onesided", 0));
  int64_t axis = ctx.opset() >= 20 ? -2 : 1;
  if (ctx.opset() < 20) {
    STRIDER_ASSIGN_OR_RETURN(axis, ctx.attributes().get_int("axis", 1));
  } else if (const RefTensor* a = ctx.optional_input(2)) {
    STRIDER_ASSIGN_OR_RETURN(axis, read_scalar_int(*a, "input 2 (axis)"));
  }
  if (axis < 0) axis += rank;
  if (axis <= 0 || axis >= rank - 1) return invalid_model("axis must be a signal dim");
  const int64_t n = x->shape[size_t(axis)];
  int64_t length = inverse && onesided ? 2 * (n - 1) : n;
  if (const RefTensor* l = ctx.optional_input(1)) {
    STRIDER_ASSIGN_OR_RETURN(length, read_scalar_int(*l, "input 1 (dft_length)"));
  }
  if (length < 1 || length > (int64_t(1) << 24)) return invalid_model("dft_length out of range");
  const bool real_out = inverse && onesided;
  const int64_t bins = real_out || !onesided ? length : length / 2 + 1, parts = x->shape.back();
  Shape out_shape = x->shape;
  out_shape[size_t(axis)] = bins;
  out_shape.back() = real_out ? 1 : 2;
  RefTensor y = RefTensor::zeros(x->dtype, out_shape);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x->shape[size_t(d)];
  for (int64_t d = axis + 1; d < rank - 1; ++d) inner *= x->shape[size_t(d)];
  const double sign = inverse ? 1.0 : -1.0, scale = inverse ? 1.0 / double(length) : 1.0;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      // The full spectrum (or signal) of length L this line stands for.
      std::vector<std::complex<double>> line(static_cast<size_t>(length));
      const int64_t given = std::min(n, real_out ? length / 2 + 1 : length);
      for (int64_t j = 0; j < given; ++j) {
        const size_t at = size_t(((o * n + j) * inner + i) * parts);
        line[size_t(j)] = {x->floats[at], parts == 2 ? x->floats[at + 1] : 0.0};
      }
      if (real_out)  // Hermitian: bin L - j is the conjugate of bin j
        for (int64_t j = 1; j < given; ++j)
          if (length - j != j) line[size_t(length - j)] = std::conj(line[size_t(j)]);
      for (int64_t k = 0; k < bins; ++k) {
        std::complex<double> sum = 0;
        for (int64_t j = 0; j < length; ++j)
          sum += line[size_t(j)] * std::polar(1.0, sign * 2 * std::numbers::pi * double((j * k) % length) / double(length));
        sum *= scale;
        const size_t at = size_t(((o * bins + k) * inner + i) * out_shape.back());
        y.floats[at] = sum.real();
        if (!real_out) y.floats[at + 1] = sum.imag();
      }
    }
  return OpOutputs{std::move(y)};
}

// STFT by the definition: frame f is samples [f step, f step + L) times the window, and
// bin k of it sum_j frame_j e^{-2 pi i j k / L}, k < L / 2 + 1 when one-sided.
Result<OpOutputs> stft_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "signal"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* step_input, ctx.input(1, "frame_step"));
  const RefTensor* window = ctx.optional_input(2);
  const RefTensor* length_input = ctx.optional_input(3);
  if (x->rank() != 3 || (x->shape[2] != 1 && x->shape[2] != 2) || !x->is_floating())
    return invalid_model("signal must be floating [batch, length, 1|2]");
  if (window && (window->rank() != 1 || !window->is_floating())) return invalid_model("window must be floating 1-D");
  STRIDER_ASSIGN_OR_RETURN(const int64_t step, read_scalar_int(*step_input, "input 1 (frame_step)"));
  int64_t length = window ? window->shape[0] : 0;
  if (length_input) {
    STRIDER_ASSIGN_OR_RETURN(length, read_scalar_int(*length_input, "input 3 (frame_length)"));
  }
  if (step < 1 || length < 1 || length > x->shape[1] || (window && window->shape[0] != length))
    return invalid_model("frame_step, frame_length and the window do not fit the signal");
  STRIDER_ASSIGN_OR_RETURN(int64_t onesided, ctx.attributes().get_int("onesided", 1));
  const int64_t batches = x->shape[0], samples = x->shape[1], parts = x->shape[2];
  const int64_t frames = (samples - length) / step + 1, bins = onesided ? length / 2 + 1 : length;
  RefTensor y = RefTensor::zeros(x->dtype, {batches, frames, bins, 2});
  for (int64_t b = 0; b < batches; ++b)
    for (int64_t f = 0; f < frames; ++f)
      for (int64_t k = 0; k < bins; ++k) {
        std::complex<double> sum = 0;
        for (int64_t j = 0; j < length; ++j) {
          const size_t at = size_t((b * samples + f * step + j) * parts);
          const double w = window ? window->floats[size_t(j)] : 1.0;
          const std::complex<double> v{x->floats[at] * w, parts == 2 ? x->floats[at + 1] * w : 0.0};
          sum += v * std::polar(1.0, -2 * std::numbers::pi * double((j * k) % length) / double(length));
        }
        const size_t at = size_t(((b * frames + f) * bins + k) * 2);
        y.floats[at] = sum.real();
        y.floats[at + 1] = sum.imag();
      }
  return OpOutputs{std::move(y)};
}

// Col2Im: each input value (channel c, block position k, block place l) added to the image
// pixel it came from; places and positions in row-major order, pixels in the padding dropped.
Result<OpOutputs> col2im_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "input"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* image_t, ctx.input(1, "image_shape"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* block_t, ctx.input(2, "block_shape"));
  const std::vector<int64_t>& image = image_t->ints;
  const std::vector<int64_t>& block = block_t->ints;
  const size_t dims = image.size();
  if (x->rank() != 3 || block.size() != dims || dims == 0) return invalid_model("Col2Im: input [N, C K, L] with matching shapes");
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> strides, ctx.attributes().get_ints("strides", std::vector<int64_t>(dims, 1)));
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> dilations, ctx.attributes().get_ints("dilations", std::vector<int64_t>(dims, 1)));
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> pads, ctx.attributes().get_ints("pads", std::vector<int64_t>(2 * dims, 0)));
  std::vector<int64_t> places(dims);
  int64_t block_size = 1, place_count = 1;
  for (size_t d = 0; d < dims; ++d) {
    places[d] = (image[d] + pads[d] + pads[dims + d] - ((block[d] - 1) * dilations[d] + 1)) / strides[d] + 1;
    block_size *= block[d];
    place_count *= places[d];
  }
  if (block_size <= 0 || x->shape[1] % block_size != 0 || x->shape[2] != place_count)
    return invalid_model("Col2Im: the input does not hold C x block elements x block places");
  const int64_t batch = x->shape[0], channels = x->shape[1] / block_size;
  Shape out_shape{batch, channels};
  out_shape.insert(out_shape.end(), image.begin(), image.end());
  STRIDER_ASSIGN_OR_RETURN(int64_t count, checked_element_count(out_shape, "the image"));
  RefTensor y = RefTensor::zeros(x->dtype, out_shape);
  const int64_t pixels = count / std::max<int64_t>(batch * channels, 1);
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t k = 0; k < block_size; ++k)
        for (int64_t l = 0; l < place_count; ++l) {
          int64_t rest_k = k, rest_l = l, pixel = 0, scale = 1;
          bool inside = true;
          for (size_t d = dims; d-- > 0;) {
            const int64_t offset = rest_k % block[d], place = rest_l % places[d];
            rest_k /= block[d];
            rest_l /= places[d];
            const int64_t at = place * strides[d] + offset * dilations[d] - pads[d];
            inside = inside && at >= 0 && at < image[d];
            pixel += at * scale;
            scale *= image[d];
          }
          if (!inside) continue;
          const double v = x->floats[size_t(((n * channels + c) * block_size + k) * place_count + l)];
          y.floats[size_t((n * channels + c) * pixels + pixel)] += v;
        }
  return OpOutputs{std::move(y)};
}

// DeformConv (2-D), from the ONNX definition: each kernel tap of output (oh, ow) samples
// X[n, c] at (oh stride - pad + i dilation + dy, ow stride - pad + j dilation + dx), where
// (dy, dx) is offset[n, ((g kh + i) kw + j) 2 + {0, 1}, oh, ow] for c's offset group g,
// bilinearly with every corner outside the image reading 0, times the mask.
Result<OpOutputs> deform_conv_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "X"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* w, ctx.input(1, "W"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* offset, ctx.input(2, "offset"));
  const RefTensor* bias = ctx.optional_input(3);
  const RefTensor* mask = ctx.optional_input(4);
  if (x->rank() != 4 || w->rank() != 4 || offset->rank() != 4) return unsupported("DeformConv beyond 2-D");
  STRIDER_ASSIGN_OR_RETURN(int64_t group, ctx.attributes().get_int("group", 1));
  STRIDER_ASSIGN_OR_RETURN(int64_t offset_group, ctx.attributes().get_int("offset_group", 1));
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> strides, ctx.attributes().get_ints("strides", {1, 1}));
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> dilations, ctx.attributes().get_ints("dilations", {1, 1}));
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> pads, ctx.attributes().get_ints("pads", {0, 0, 0, 0}));
  const int64_t batch = x->shape[0], channels = x->shape[1], height = x->shape[2], width = x->shape[3];
  const int64_t out_c = w->shape[0], kh = w->shape[2], kw = w->shape[3], out_h = offset->shape[2], out_w = offset->shape[3];
  if (group < 1 || offset_group < 1 || channels != w->shape[1] * group || out_c % group != 0 || channels % offset_group != 0 ||
      offset->shape[1] != offset_group * kh * kw * 2 || strides.size() != 2 || dilations.size() != 2 || pads.size() != 4)
    return invalid_model("DeformConv operands do not fit its groups and kernel");
  // Past libonnx's opsets nothing else has checked B's and mask's types and sizes.
  for (const RefTensor* t : {x, w, offset, bias, mask})
    if (t != nullptr && !t->is_floating()) return invalid_model("DeformConv operands must be floating");
  if (offset->shape[0] != batch || (bias && bias->num_elements() != out_c) ||
      (mask && mask->shape != Shape{batch, offset_group * kh * kw, out_h, out_w}))
    return invalid_model(fmt::format("DeformConv offset {}, B or mask do not fit X {} and W {}", describe(*offset),
                                     describe(*x), describe(*w)));
  auto x_at = [&](int64_t n, int64_t c, int64_t i, int64_t j) {
    return i < 0 || i >= height || j < 0 || j >= width ? 0.0 : x->floats[size_t(((n * channels + c) * height + i) * width + j)];
  };
  auto sample = [&](int64_t n, int64_t c, double h, double v) {
    const double fh = std::floor(h), fv = std::floor(v);
    const int64_t i = int64_t(std::clamp(fh, -2.0, double(height) + 1)), j = int64_t(std::clamp(fv, -2.0, double(width) + 1));
    const double a = h - fh, b = v - fv;
    if (!std::isfinite(h) || !std::isfinite(v)) return 0.0;
    return (1 - a) * (1 - b) * x_at(n, c, i, j) + (1 - a) * b * x_at(n, c, i, j + 1) + a * (1 - b) * x_at(n, c, i + 1, j) +
           a * b * x_at(n, c, i + 1, j + 1);
  };
  RefTensor y = RefTensor::zeros(x->dtype, {batch, out_c, out_h, out_w});
  const int64_t per_group_in = channels / group, per_group_out = out_c / group, per_offset_group = channels / offset_group;
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t oc = 0; oc < out_c; ++oc)
      for (int64_t oh = 0; oh < out_h; ++oh)
        for (int64_t ow = 0; ow < out_w; ++ow) {
          double sum = bias ? bias->floats[size_t(oc)] : 0.0;
          for (int64_t ci = 0; ci < per_group_in; ++ci) {
            const int64_t c = (oc / per_group_out) * per_group_in + ci, g = c / per_offset_group;
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                const int64_t tap = (g * kh + i) * kw + j;
                const double dy = offset->floats[size_t(((n * offset->shape[1] + tap * 2) * out_h + oh) * out_w + ow)];
                const double dx = offset->floats[size_t(((n * offset->shape[1] + tap * 2 + 1) * out_h + oh) * out_w + ow)];
                double value = sample(n, c, double(oh * strides[0] - pads[0] + i * dilations[0]) + dy,
                                      double(ow * strides[1] - pads[1] + j * dilations[1]) + dx);
                if (mask) value *= mask->floats[size_t(((n * mask->shape[1] + tap) * out_h + oh) * out_w + ow)];
                sum += w->floats[size_t(((oc * per_group_in + ci) * kh + i) * kw + j)] * value;
              }
          }
          y.floats[size_t(((n * out_c + oc) * out_h + oh) * out_w + ow)] = sum;
        }
  return OpOutputs{std::move(y)};
}

constexpr OpDefinition kLinearOps[] = {
    {"DeformConv", 19, 27, deform_conv_op},
    {"Col2Im", 18, 27, col2im_op},
    {"STFT", 17, 27, stft_op},
    {"DFT", 17, 27, dft_op},
    {"ConvTranspose", 1, 27, conv_transpose_op},
    {"MatMul", 7, 27, matmul_op},
    {"Gemm", 7, 27, gemm_op},
    {"Conv", 7, 27, conv_op},
    {"MatMulInteger", 10, 27, matmul_integer_op},
    {"ConvInteger", 10, 27, conv_integer_op},
    {"QLinearConv", 10, 27, qlinear_conv_op},
};

}  // namespace

std::span<const OpDefinition> linear_op_definitions() { return kLinearOps; }

}  // namespace strider::ref
