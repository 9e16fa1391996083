#include "strider/tensor.h"

#include <fmt/format.h>

#include <new>
#include <utility>

#include "base/check.h"
#include "base/checked_math.h"
#include "base/float16.h"
#include "base/shape.h"
#include "base/small_types.h"

namespace strider {

Tensor::Tensor(DType dtype, Shape shape) : Tensor(for_overwrite(dtype, std::move(shape))) {
  if (!data_.empty()) std::memset(data_.data(), 0, data_.size());
}

Tensor Tensor::for_overwrite(DType dtype, Shape shape) {
  std::optional<int64_t> count = checked_element_count(shape, dtype_size(dtype));
  STRIDER_CHECK(count.has_value(), "{}{} is not a valid tensor size", dtype_name(dtype), shape_to_string(shape));
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.data_.resize(size_t(*count * dtype_size(dtype)));
  return t;
}

Result<Tensor> Tensor::create(DType dtype, Shape shape, int64_t max_bytes) {
  std::optional<int64_t> count = checked_element_count(shape, dtype_size(dtype));
  if (!count)
    return invalid_argument(fmt::format("{}{} is too large: more than 2^52 bytes, or a negative dim", dtype_name(dtype),
                                        shape_to_string(shape)));
  int64_t bytes = *count * dtype_size(dtype);
  if (bytes > max_bytes)
    return resource_exhausted(fmt::format("{}{} needs {} bytes, more than the memory budget of {} bytes", dtype_name(dtype),
                                          shape_to_string(shape), bytes, max_bytes));
  try {
    return Tensor(dtype, std::move(shape));
  } catch (const std::bad_alloc&) {
    return resource_exhausted(fmt::format("{}{}: allocating {} bytes failed", dtype_name(dtype),
                                          shape_to_string(shape), bytes));
  }
}

Result<Tensor> Tensor::from_bytes(DType dtype, Shape shape, std::span<const std::byte> data) {
  std::optional<int64_t> count = checked_element_count(shape, dtype_size(dtype));
  if (!count)
    return invalid_argument(fmt::format("{}{} is too large: more than 2^52 bytes, or a negative dim", dtype_name(dtype),
                                        shape_to_string(shape)));
  int64_t expected = *count * dtype_size(dtype);
  if (int64_t(data.size()) != expected)
    return invalid_argument(fmt::format("{}{} needs {} bytes, got {}", dtype_name(dtype),
                                        shape_to_string(shape), expected, data.size()));
  Tensor t = for_overwrite(dtype, std::move(shape));
  if (!data.empty()) std::memcpy(t.data_.data(), data.data(), data.size());
  return t;
}

Result<Tensor> Tensor::borrow(DType dtype, Shape shape, void* data, size_t byte_size) {
  std::optional<int64_t> count = checked_element_count(shape, dtype_size(dtype));
  if (!count)
    return invalid_argument(fmt::format("{}{} is too large: more than 2^52 bytes, or a negative dim", dtype_name(dtype),
                                        shape_to_string(shape)));
  const size_t expected = size_t(*count * dtype_size(dtype));
  if (byte_size != expected)
    return invalid_argument(fmt::format("{}{} needs {} bytes, the memory given has {}", dtype_name(dtype),
                                        shape_to_string(shape), expected, byte_size));
  if (data == nullptr && expected > 0)
    return invalid_argument(fmt::format("{}{}: no memory given (null)", dtype_name(dtype), shape_to_string(shape)));
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  static std::byte empty_tensor_bytes[1];  // a borrowed empty tensor still marks itself borrowed
  t.borrowed_ = data ? static_cast<std::byte*>(data) : empty_tensor_bytes;
  t.borrowed_size_ = expected;
  return t;
}

Result<Tensor> Tensor::adopt(DType dtype, Shape shape, HostBuffer buffer) {
  std::optional<int64_t> count = checked_element_count(shape, dtype_size(dtype));
  if (!count || size_t(*count * dtype_size(dtype)) > buffer.size() || (buffer.data() == nullptr && *count > 0))
    return invalid_argument(fmt::format("{}{} does not fit a host buffer of {} bytes", dtype_name(dtype),
                                        shape_to_string(shape), buffer.size()));
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.borrowed_size_ = size_t(*count * dtype_size(dtype));
  t.adopted_ = std::move(buffer);
  static std::byte empty_tensor_bytes[1];
  t.borrowed_ = t.adopted_.data() ? t.adopted_.data() : empty_tensor_bytes;
  return t;
}

// A copy of an adopting tensor owns a copy of the bytes in ordinary memory; a copy of a
// borrowed one views the same bytes; a copy of an ordinary one copies its vector.
Tensor::Tensor(const Tensor& other) : dtype_(other.dtype_), shape_(other.shape_) {
  if (other.adopted_.data()) {
    data_.assign(other.bytes(), other.bytes() + other.byte_size());
  } else {
    data_ = other.data_;
    borrowed_ = other.borrowed_;
    borrowed_size_ = other.borrowed_size_;
  }
}

// The moved-from tensor is left empty (it no longer points at bytes it gave away).
Tensor::Tensor(Tensor&& other) noexcept
    : dtype_(other.dtype_),
      shape_(std::move(other.shape_)),
      data_(std::move(other.data_)),
      borrowed_(std::exchange(other.borrowed_, nullptr)),
      borrowed_size_(std::exchange(other.borrowed_size_, 0)),
      adopted_(std::move(other.adopted_)) {
  other.shape_.clear();
}

Tensor& Tensor::operator=(const Tensor& other) {
  if (this != &other) *this = Tensor(other);
  return *this;
}

Tensor& Tensor::operator=(Tensor&& other) noexcept {
  if (this != &other) {
    dtype_ = other.dtype_;
    shape_ = std::move(other.shape_);
    other.shape_.clear();
    data_ = std::move(other.data_);
    borrowed_ = std::exchange(other.borrowed_, nullptr);
    borrowed_size_ = std::exchange(other.borrowed_size_, 0);
    adopted_ = std::move(other.adopted_);
  }
  return *this;
}

bool Tensor::has_layout(DType dtype, const Shape& shape) const {
  if (dtype != dtype_ || shape != shape_) return false;
  std::optional<int64_t> count = checked_element_count(shape, dtype_size(dtype));
  return count && byte_size() == size_t(*count * dtype_size(dtype));
}

int64_t Tensor::num_elements() const { return strider::num_elements(shape_); }

double Tensor::element_as_double(int64_t i) const {
  STRIDER_CHECK(i >= 0 && i < num_elements());
  switch (dtype_) {
    case DType::kF32: return data<float>()[i];
    case DType::kF16: return data<f16>()[i].to_float();
    case DType::kBF16: return data<bf16>()[i].to_float();
    case DType::kF64: return data<double>()[i];
    case DType::kI64: return double(data<int64_t>()[i]);
    case DType::kI32: return data<int32_t>()[i];
    case DType::kI8: return data<int8_t>()[i];
    case DType::kU8: return data<uint8_t>()[i];
    case DType::kBool: return data<uint8_t>()[i] != 0;
    case DType::kI16: return data<int16_t>()[i];
    case DType::kU16: return data<uint16_t>()[i];
    case DType::kU32: return data<uint32_t>()[i];
    case DType::kU64: return double(data<uint64_t>()[i]);
    default: return small_type_to_double(data<uint8_t>()[i], dtype_);
  }
}

int64_t Tensor::element_as_int(int64_t i) const {
  STRIDER_CHECK(i >= 0 && i < num_elements());
  switch (dtype_) {
    case DType::kI64: return data<int64_t>()[i];
    case DType::kI32: return data<int32_t>()[i];
    case DType::kI8: return data<int8_t>()[i];
    case DType::kU8: return data<uint8_t>()[i];
    case DType::kBool: return data<uint8_t>()[i] != 0;
    case DType::kI16: return data<int16_t>()[i];
    case DType::kU16: return data<uint16_t>()[i];
    case DType::kU32: return data<uint32_t>()[i];
    case DType::kU64: return int64_t(data<uint64_t>()[i]);
    case DType::kI4:
    case DType::kI2: return data<int8_t>()[i];
    case DType::kU4:
    case DType::kU2: return data<uint8_t>()[i];
    default: return saturate_to_int<int64_t>(element_as_double(i));
  }
}

}  // namespace strider
