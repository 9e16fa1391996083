// Ops that make values rather than transform them: Constant, ConstantOfShape, Shape, Size,
// Range, EyeLike and the Hann, Hamming and Blackman windows.
#include <fmt/format.h>

#include <cmath>

#include "base/onnx_types.h"
#include "base/shape.h"
#include "reference/op_support.h"

namespace strider::ref {
namespace {

RefTensor int64_vector(const std::vector<int64_t>& values) {
  RefTensor t = RefTensor::zeros(DType::kI64, {int64_t(values.size())});
  t.ints = values;
  return t;
}

// Constant: exactly one of value, value_float(s), value_int(s). sparse_value and the
// string forms have no strider dtype.
Result<OpOutputs> constant_op(const OpContext& ctx) {
  const AttributeMap& attrs = ctx.attributes();
  for (const char* name : {"sparse_value", "value_string", "value_strings"})
    if (attrs.has(name)) return unsupported(fmt::format("attribute '{}' is not supported", name));
  int present = 0;
  for (const char* name : {"value", "value_float", "value_floats", "value_int", "value_ints"})
    present += attrs.has(name) ? 1 : 0;
  if (present != 1)
    return invalid_model(
        fmt::format("Constant needs exactly one value attribute, has {}", present));
  if (attrs.has("value")) {
    STRIDER_ASSIGN_OR_RETURN(const Tensor* value, attrs.require_tensor("value"));
    return OpOutputs{ref_from_tensor(*value)};
  }
  if (attrs.has("value_float") || attrs.has("value_floats")) {
    bool scalar = attrs.has("value_float");
    std::vector<float> values;
    if (scalar) {
      STRIDER_ASSIGN_OR_RETURN(float v, attrs.get_float("value_float", 0));
      values.push_back(v);
    } else {
      STRIDER_ASSIGN_OR_RETURN(values, attrs.get_floats("value_floats", {}));
    }
    RefTensor t = RefTensor::zeros(DType::kF32, scalar ? Shape{} : Shape{int64_t(values.size())});
    t.floats.assign(values.begin(), values.end());
    return OpOutputs{std::move(t)};
  }
  if (attrs.has("value_int")) {
    STRIDER_ASSIGN_OR_RETURN(int64_t v, attrs.require_int("value_int"));
    RefTensor t = RefTensor::zeros(DType::kI64, {});
    t.ints[0] = v;
    return OpOutputs{std::move(t)};
  }
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> values, attrs.require_ints("value_ints"));
  return OpOutputs{int64_vector(values)};
}

Result<OpOutputs> constant_of_shape_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* shape_input, ctx.input(0, "input"));
  STRIDER_ASSIGN_OR_RETURN(Shape shape, read_ints(*shape_input, "input 0 (input)"));
  STRIDER_RETURN_IF_ERROR(checked_element_count(shape, "input 0 (input)"));
  RefTensor fill = RefTensor::zeros(DType::kF32, {1});
  if (ctx.attributes().has("value")) {
    STRIDER_ASSIGN_OR_RETURN(const Tensor* value, ctx.attributes().require_tensor("value"));
    if (value->num_elements() != 1)
      return invalid_model(
          fmt::format("attribute 'value' must have one element, has {}", value->num_elements()));
    fill = ref_from_tensor(*value);
  }
  RefTensor out = RefTensor::zeros(fill.dtype, shape);
  for (double& v : out.floats) v = fill.floats[0];
  for (int64_t& v : out.ints) v = fill.ints[0];
  return OpOutputs{std::move(out)};
}

// Shape, with the start/end window of opset 15 (negative counts from the end, then clamped).
Result<OpOutputs> shape_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "data"));
  int64_t rank = x->rank();
  int64_t start = 0, end = rank;
  if (ctx.opset() >= 15) {
    STRIDER_ASSIGN_OR_RETURN(start, ctx.attributes().get_int("start", 0));
    STRIDER_ASSIGN_OR_RETURN(end, ctx.attributes().get_int("end", rank));
  }
  auto clamp_to_rank = [rank](int64_t v) {
    if (v < 0) v += rank;
    return v < 0 ? 0 : (v > rank ? rank : v);
  };
  start = clamp_to_rank(start);
  end = clamp_to_rank(end);
  std::vector<int64_t> dims;
  for (int64_t i = start; i < end; ++i) dims.push_back(x->shape[size_t(i)]);
  return OpOutputs{int64_vector(dims)};
}

Result<OpOutputs> size_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "data"));
  RefTensor out = RefTensor::zeros(DType::kI64, {});
  out.ints[0] = x->num_elements();
  return OpOutputs{std::move(out)};
}

// Integer Range: exact, n = ceil((limit - start) / delta) computed without overflow.
Result<RefTensor> integer_range(DType dtype, int64_t start, int64_t limit, int64_t delta) {
  __int128 span = __int128(limit) - __int128(start);
  __int128 count = span / delta;
  if (span % delta != 0 && ((span > 0) == (delta > 0))) ++count;
  if (count < 0) count = 0;
  if (count > kMaxElements)
    return invalid_argument(
        fmt::format("Range of {} to {} by {} is too long", start, limit, delta));
  RefTensor out = RefTensor::zeros(dtype, {int64_t(count)});
  for (int64_t i = 0; i < int64_t(count); ++i)
    out.ints[size_t(i)] = wrap_to_dtype(int64_t(__int128(start) + __int128(i) * delta), dtype);
  return out;
}

Result<OpOutputs> range_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* start, ctx.input(0, "start"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* limit, ctx.input(1, "limit"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* delta, ctx.input(2, "delta"));
  STRIDER_RETURN_IF_ERROR(require_same_dtype(*start, *limit, "input 0 (start)", "input 1 (limit)"));
  STRIDER_RETURN_IF_ERROR(require_same_dtype(*start, *delta, "input 0 (start)", "input 2 (delta)"));
  if (start->dtype == DType::kBool) return invalid_model("Range takes numeric inputs, got bool");
  if (!start->is_floating()) {
    STRIDER_ASSIGN_OR_RETURN(int64_t s, read_scalar_int(*start, "input 0 (start)"));
    STRIDER_ASSIGN_OR_RETURN(int64_t l, read_scalar_int(*limit, "input 1 (limit)"));
    STRIDER_ASSIGN_OR_RETURN(int64_t d, read_scalar_int(*delta, "input 2 (delta)"));
    if (d == 0) return invalid_argument("input 2 (delta) is 0");
    STRIDER_ASSIGN_OR_RETURN(RefTensor out, integer_range(start->dtype, s, l, d));
    return OpOutputs{std::move(out)};
  }
  STRIDER_ASSIGN_OR_RETURN(double s, read_scalar_double(*start, "input 0 (start)"));
  STRIDER_ASSIGN_OR_RETURN(double l, read_scalar_double(*limit, "input 1 (limit)"));
  STRIDER_ASSIGN_OR_RETURN(double d, read_scalar_double(*delta, "input 2 (delta)"));
  if (d == 0) return invalid_argument("input 2 (delta) is 0");
  double count = std::max(std::ceil((l - s) / d), 0.0);
  if (!(count <= double(kMaxElements)))
    return invalid_argument(fmt::format("Range of {} to {} by {} is too long", s, l, d));
  RefTensor out = RefTensor::zeros(start->dtype, {int64_t(count)});
  for (size_t i = 0; i < out.floats.size(); ++i) out.floats[i] = s + double(i) * d;
  return OpOutputs{std::move(out)};
}

// EyeLike: input 0's 2-D shape, 1 where column - row == k; dtype the attribute's or input 0's.
Result<OpOutputs> eye_like_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "input"));
  if (x->rank() != 2) return invalid_model(fmt::format("input {} must be 2-D", describe(*x)));
  DType dtype = x->dtype;
  if (ctx.attributes().has("dtype")) {
    STRIDER_ASSIGN_OR_RETURN(int64_t code, ctx.attributes().get_int("dtype", 0));
    std::optional<DType> d = dtype_from_onnx_code(int(code));
    if (!d) return unsupported(fmt::format("dtype {}", code));
    dtype = *d;
  }
  STRIDER_ASSIGN_OR_RETURN(int64_t k, ctx.attributes().get_int("k", 0));
  RefTensor y = RefTensor::zeros(dtype, x->shape);
  for (int64_t r = 0; r < x->shape[0]; ++r) {
    const int64_t c = r + k;
    if (c < 0 || c >= x->shape[1]) continue;
    if (y.is_floating()) y.floats[size_t(r * x->shape[1] + c)] = 1.0;
    else y.ints[size_t(r * x->shape[1] + c)] = 1;
  }
  return OpOutputs{std::move(y)};
}

// The generalized cosine windows: w[n] = sum_k (-1)^k a_k cos(2 pi k n / D), D = size when
// periodic (the default), size - 1 when symmetric.
Result<OpOutputs> cosine_window(const OpContext& ctx, std::initializer_list<double> a) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* size_input, ctx.input(0, "size"));
  STRIDER_ASSIGN_OR_RETURN(int64_t size, read_scalar_int(*size_input, "input 0 (size)"));
  if (size < 0 || size > kMaxElements) return invalid_argument(fmt::format("window size {}", size));
  STRIDER_ASSIGN_OR_RETURN(int64_t periodic, ctx.attributes().get_int("periodic", 1));
  STRIDER_ASSIGN_OR_RETURN(int64_t code, ctx.attributes().get_int("output_datatype", 1));
  std::optional<DType> dtype = dtype_from_onnx_code(int(code));
  if (!dtype) return unsupported(fmt::format("output_datatype {}", code));
  RefTensor y = RefTensor::zeros(*dtype, {size});
  const double denominator = double(periodic != 0 ? size : size - 1), pi = 3.14159265358979323846;
  for (int64_t n = 0; n < size; ++n) {
    double v = 0, sign = 1;
    int64_t k = 0;
    for (double coefficient : a) {
      v += sign * coefficient * std::cos(2.0 * pi * double(k) * double(n) / denominator);
      sign = -sign;
      ++k;
    }
    if (y.is_floating()) y.floats[size_t(n)] = v;
    else y.ints[size_t(n)] = truncate_to_int(v);
  }
  return OpOutputs{std::move(y)};
}

Result<OpOutputs> hann_window_op(const OpContext& ctx) { return cosine_window(ctx, {0.5, 0.5}); }
Result<OpOutputs> hamming_window_op(const OpContext& ctx) { return cosine_window(ctx, {25.0 / 46.0, 21.0 / 46.0}); }
Result<OpOutputs> blackman_window_op(const OpContext& ctx) { return cosine_window(ctx, {0.42, 0.5, 0.08}); }

// MelWeightMatrix, from the ONNX definition: num_mel_bins + 2 edges equally spaced in mel
// between the edge frequencies (from float32 inputs), each a spectrum bin
// floor((dft_length + 1) hertz / sample_rate); triangles rising over [left, centre] and
// falling over [centre, right).
Result<OpOutputs> mel_weight_matrix_op(const OpContext& ctx) {
  int64_t scalars[3];
  double edges_hz[2];
  const char* names[] = {"num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz"};
  for (size_t i = 0; i < 5; ++i) {
    STRIDER_ASSIGN_OR_RETURN(const RefTensor* t, ctx.input(i, names[i]));
    if (t->num_elements() != 1) return invalid_model(fmt::format("{} must be a scalar", names[i]));
    if (i < 3) scalars[i] = t->element_as_int(0);
    else edges_hz[i - 3] = double(float(t->element_as_double(0)));
  }
  const int64_t mels = scalars[0], length = scalars[1], rate = scalars[2];
  if (mels < 1 || length < 1 || rate < 1 || mels > (int64_t(1) << 20) || length > (int64_t(1) << 30))
    return invalid_argument("MelWeightMatrix sizes out of range");
  STRIDER_ASSIGN_OR_RETURN(int64_t code, ctx.attributes().get_int("output_datatype", 1));
  std::optional<DType> dtype = dtype_from_onnx_code(int(code));
  if (!dtype || !is_floating(*dtype)) return invalid_model("output_datatype is not a floating type");
  const int64_t bins = length / 2 + 1;
  auto to_mel = [](double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); };
  const double low = to_mel(edges_hz[0]), spacing = (to_mel(edges_hz[1]) - low) / double(mels + 2);
  std::vector<int64_t> edge;
  for (int64_t k = 0; k < mels + 2; ++k) {
    const double hz = 700.0 * (std::pow(10.0, (low + double(k) * spacing) / 2595.0) - 1.0);
    const double bin = std::floor(double(length + 1) * hz / double(rate));
    if (!(bin >= 0 && bin < double(bins))) return invalid_argument("a mel band edge falls outside the spectrum");
    edge.push_back(int64_t(bin));
  }
  RefTensor out = RefTensor::zeros(*dtype, {bins, mels});
  for (int64_t m = 0; m < mels; ++m) {
    const int64_t a = edge[size_t(m)], b = edge[size_t(m + 1)], c = edge[size_t(m + 2)];
    for (int64_t j = a; j <= b; ++j) out.floats[size_t(j * mels + m)] = b == a ? 1.0 : double(j - a) / double(b - a);
    for (int64_t j = b; j < c; ++j) out.floats[size_t(j * mels + m)] = double(c - j) / double(c - b);
  }
  return OpOutputs{std::move(out)};
}

constexpr OpDefinition kGeneratorOps[] = {
    {"MelWeightMatrix", 17, 27, mel_weight_matrix_op},
    {"Constant", 7, 27, constant_op}, {"ConstantOfShape", 9, 27, constant_of_shape_op},
    {"Shape", 7, 27, shape_op},       {"Size", 7, 27, size_op},
    {"Range", 11, 27, range_op},
    {"EyeLike", 9, 27, eye_like_op},
    {"HannWindow", 17, 27, hann_window_op}, {"HammingWindow", 17, 27, hamming_window_op},
    {"BlackmanWindow", 17, 27, blackman_window_op},
};

}  // namespace

std::span<const OpDefinition> generator_op_definitions() { return kGeneratorOps; }

}  // namespace strider::ref
