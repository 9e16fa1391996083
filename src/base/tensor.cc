#include "strider/tensor.h"

#include <fmt/format.h>

#include "base/check.h"
#include "base/float16.h"
#include "base/shape.h"

namespace strider {

Tensor::Tensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  for (int64_t d : shape_) STRIDER_CHECK(d >= 0, "negative dimension in {}", shape_to_string(shape_));
  data_.resize(size_t(strider::num_elements(shape_) * dtype_size(dtype)));
}

Result<Tensor> Tensor::from_bytes(DType dtype, Shape shape, std::span<const std::byte> data) {
  for (int64_t d : shape)
    if (d < 0) return invalid_argument(fmt::format("negative dimension in {}", shape_to_string(shape)));
  int64_t expected = strider::num_elements(shape) * dtype_size(dtype);
  if (int64_t(data.size()) != expected)
    return invalid_argument(fmt::format("{}{} needs {} bytes, got {}", dtype_name(dtype),
                                        shape_to_string(shape), expected, data.size()));
  Tensor t(dtype, std::move(shape));
  if (!data.empty()) std::memcpy(t.data_.data(), data.data(), data.size());
  return t;
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
  }
  return 0;
}

int64_t Tensor::element_as_int(int64_t i) const {
  STRIDER_CHECK(i >= 0 && i < num_elements());
  switch (dtype_) {
    case DType::kI64: return data<int64_t>()[i];
    case DType::kI32: return data<int32_t>()[i];
    case DType::kI8: return data<int8_t>()[i];
    case DType::kU8: return data<uint8_t>()[i];
    case DType::kBool: return data<uint8_t>()[i] != 0;
    default: return int64_t(element_as_double(i));
  }
}

}  // namespace strider
