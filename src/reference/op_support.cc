#include "reference/op_support.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/shape.h"

namespace strider::ref {

Result<const RefTensor*> OpContext::input(size_t i, std::string_view name) const {
  if (!has_input(i)) return invalid_model(fmt::format("missing required input {} ({})", i, name));
  return inputs_[i];
}

std::string describe(const RefTensor& t) {
  return fmt::format("{}{}", dtype_name(t.dtype), shape_to_string(t.shape));
}

Status require_floating(const RefTensor& t, std::string_view what) {
  if (t.is_floating()) return Status::ok();
  return invalid_model(
      fmt::format("{} is {}, expected a floating type", what, dtype_name(t.dtype)));
}

Status require_integer(const RefTensor& t, std::string_view what) {
  if (is_integral(t.dtype)) return Status::ok();
  return invalid_model(
      fmt::format("{} is {}, expected an integer type", what, dtype_name(t.dtype)));
}

Status require_quant_param(const RefTensor* t, QuantParam kind, int64_t count, std::string_view what) {
  if (t == nullptr) return Status::ok();
  STRIDER_RETURN_IF_ERROR(kind == QuantParam::kScale ? require_floating(*t, what) : require_integer(*t, what));
  if (t->num_elements() == 1 || (t->rank() == 1 && t->shape[0] == count)) return Status::ok();
  return invalid_model(fmt::format("{} is {}, expected one value or {} (one per index of its axis)", what, describe(*t), count));
}

Status require_same_dtype(const RefTensor& a, const RefTensor& b, std::string_view what_a,
                          std::string_view what_b) {
  if (a.dtype == b.dtype) return Status::ok();
  return invalid_model(fmt::format("{} is {} but {} is {}; they must have the same type", what_a,
                                   dtype_name(a.dtype), what_b, dtype_name(b.dtype)));
}

Result<int64_t> normalized_axis(int64_t axis, int64_t rank, std::string_view what) {
  int64_t out = 0;
  if (!normalize_axis(axis, rank, &out))
    return invalid_model(
        fmt::format("{} {} is out of range [{}, {}) for rank {}", what, axis, -rank, rank, rank));
  return out;
}

Result<std::vector<int64_t>> normalized_axes(std::span<const int64_t> axes, int64_t rank,
                                             std::string_view what) {
  std::vector<int64_t> out;
  std::vector<bool> seen(size_t(rank), false);
  for (int64_t axis : axes) {
    STRIDER_ASSIGN_OR_RETURN(int64_t a, normalized_axis(axis, rank, what));
    if (seen[size_t(a)]) return invalid_model(fmt::format("{} repeats axis {}", what, axis));
    seen[size_t(a)] = true;
    out.push_back(a);
  }
  return out;
}

Result<std::vector<int64_t>> read_ints(const RefTensor& t, std::string_view what) {
  STRIDER_RETURN_IF_ERROR(require_integer(t, what));
  return t.ints;
}

std::vector<double> read_doubles(const RefTensor& t) {
  if (t.is_floating()) return t.floats;
  return std::vector<double>(t.ints.begin(), t.ints.end());
}

Result<double> read_scalar_double(const RefTensor& t, std::string_view what) {
  if (t.num_elements() != 1)
    return invalid_model(fmt::format("{} must have one element, got {}", what, describe(t)));
  return t.element_as_double(0);
}

Result<int64_t> read_scalar_int(const RefTensor& t, std::string_view what) {
  if (t.num_elements() != 1)
    return invalid_model(fmt::format("{} must have one element, got {}", what, describe(t)));
  return t.element_as_int(0);
}

Result<int64_t> checked_element_count(const Shape& shape, std::string_view what) {
  for (int64_t d : shape)
    if (d < 0)
      return invalid_argument(
          fmt::format("{} {} has a negative dim", what, shape_to_string(shape)));
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return int64_t(0);
  int64_t count = 1;
  for (int64_t d : shape) {
    if (count > kMaxElements / d)
      return invalid_argument(fmt::format("{} {} has more than {} elements", what,
                                          shape_to_string(shape), kMaxElements));
    count *= d;
  }
  return count;
}

Result<Shape> broadcast_or_error(const Shape& a, const Shape& b) {
  Shape out;
  if (!broadcast_shapes(a, b, &out))
    return invalid_argument(
        fmt::format("shapes {} and {} do not broadcast", shape_to_string(a), shape_to_string(b)));
  return out;
}

std::vector<int64_t> broadcast_source_index(const Shape& in, const Shape& out) {
  // Strides of `in` aligned to the trailing axes of `out`; 0 where `in` is broadcast.
  size_t offset = out.size() - in.size();
  Strides in_strides = contiguous_strides(in);
  std::vector<int64_t> strides(out.size(), 0);
  for (size_t i = 0; i < in.size(); ++i) strides[offset + i] = in[i] == 1 ? 0 : in_strides[i];
  std::vector<int64_t> source(size_t(num_elements(out)));
  for_each_index(out, [&](int64_t flat, const std::vector<int64_t>& index) {
    int64_t s = 0;
    for (size_t axis = 0; axis < index.size(); ++axis) s += index[axis] * strides[axis];
    source[size_t(flat)] = s;
  });
  return source;
}

RefTensor gather_elements(const RefTensor& source, Shape shape,
                          const std::vector<int64_t>& source_index) {
  RefTensor out = RefTensor::zeros(source.dtype, std::move(shape));
  if (source.is_floating()) {
    for (size_t i = 0; i < source_index.size(); ++i)
      out.floats[i] = source.floats[size_t(source_index[i])];
  } else {
    for (size_t i = 0; i < source_index.size(); ++i)
      out.ints[i] = source.ints[size_t(source_index[i])];
  }
  return out;
}

int64_t product(const Shape& shape, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= shape[i];
  return p;
}

}  // namespace strider::ref
