#include "onnx/tensor_proto.h"

#include <fmt/format.h>

#include <bit>
#include <charconv>
#include <cstring>
#include <limits>

#include "base/checked_math.h"
#include "base/shape.h"
#include "base/small_types.h"
#include "onnx/file_io.h"

namespace strider {

static_assert(std::endian::native == std::endian::little,
              "raw_data and .npy are little-endian; a big-endian host needs byte swaps");

namespace {

using TP = onnx::TensorProto;


// `bytes` is the size in the proto: for the sub-byte types, packed (two or four elements
// to a byte, low bits first); strider's tensor holds one element per byte.
struct StoredLayout {
  DType dtype;
  Shape shape;
  int64_t count = 0;
  int64_t bytes = 0;
  int bits = 8;  // per element in the proto, for the sub-byte types
};

std::string describe(const TP& proto, const std::string& what) {
  return what.empty() ? fmt::format("tensor '{}'", proto.name()) : what;
}

Result<StoredLayout> layout_of(const TP& proto, const std::string& what) {
  if (proto.has_segment())
    return unsupported(fmt::format("{}: segmented tensors are not supported", what));
  if (proto.data_type() == TP::UNDEFINED)
    return invalid_model(fmt::format("{}: element type is not set", what));
  std::optional<DType> dtype = dtype_from_onnx(proto.data_type());
  if (!dtype)
    return unsupported(fmt::format("{}: element type {} is not supported", what,
                                   onnx_type_name(proto.data_type())));
  StoredLayout layout{*dtype, Shape(proto.dims().begin(), proto.dims().end())};
  for (int64_t d : layout.shape)
    if (d < 0)
      return invalid_model(
          fmt::format("{}: negative dimension in dims {}", what, shape_to_string(layout.shape)));
  std::optional<int64_t> count = checked_element_count(layout.shape, dtype_size(*dtype));
  if (!count)
    return invalid_model(fmt::format("{}: dims {} are too large (more than 2^52 bytes)", what,
                                     shape_to_string(layout.shape)));
  layout.count = *count;
  layout.bits = small_type_bits(*dtype);
  layout.bytes = layout.bits < 8 ? (layout.count * layout.bits + 7) / 8 : layout.count * dtype_size(*dtype);
  return layout;
}

Status count_mismatch(const std::string& what, const char* field, int64_t got,
                      const StoredLayout& layout) {
  return invalid_model(fmt::format("{}: {} holds {} elements but dims {} need {}", what, field, got,
                                   shape_to_string(layout.shape), layout.count));
}

// Bool bytes must be 0/1 in a Tensor; any nonzero byte means true.
void normalize_bools(Tensor& t) {
  if (t.dtype() != DType::kBool) return;
  uint8_t* p = t.data<uint8_t>();
  for (int64_t i = 0; i < t.num_elements(); ++i) p[i] = p[i] != 0;
}

// Packed sub-byte elements into one byte each (a signed one sign-extended).
void unpack(const StoredLayout& layout, const uint8_t* packed, Tensor& t) {
  const int per_byte = 8 / layout.bits;
  const uint8_t mask = uint8_t((1 << layout.bits) - 1);
  uint8_t* out = t.data<uint8_t>();
  for (int64_t i = 0; i < layout.count; ++i) {
    const uint8_t field = uint8_t((packed[i / per_byte] >> ((i % per_byte) * layout.bits)) & mask);
    const bool is_signed = layout.dtype == DType::kI4 || layout.dtype == DType::kI2;
    out[i] = is_signed ? uint8_t(int8_t(uint8_t(field << (8 - layout.bits))) >> (8 - layout.bits)) : field;
  }
}

Result<Tensor> from_bytes(const StoredLayout& layout, std::span<const std::byte> bytes,
                          const char* source, const std::string& what) {
  if (int64_t(bytes.size()) != layout.bytes)
    return invalid_model(fmt::format("{}: {} has {} bytes but {}{} needs {}", what, source,
                                     bytes.size(), dtype_name(layout.dtype),
                                     shape_to_string(layout.shape), layout.bytes));
  Tensor t(layout.dtype, layout.shape);
  if (layout.bits < 8) {
    unpack(layout, reinterpret_cast<const uint8_t*>(bytes.data()), t);
    return t;
  }
  if (layout.bytes > 0) std::memcpy(t.bytes(), bytes.data(), bytes.size());
  normalize_bools(t);
  return t;
}

// Copies a typed repeated field into a Tensor of `Dst` elements. `lo`/`hi` bound the
// values a narrow type may take in a wider field (int32_data holding int8, f16 bits...).
template <typename Dst, typename Field>
Result<Tensor> from_field(const StoredLayout& layout, const Field& field, const char* field_name,
                          const std::string& what, int64_t lo, int64_t hi) {
  if (int64_t(field.size()) != layout.count)
    return count_mismatch(what, field_name, field.size(), layout);
  Tensor t(layout.dtype, layout.shape);
  Dst* out = t.data<Dst>();
  for (int64_t i = 0; i < layout.count; ++i) {
    auto v = field.Get(int(i));
    if constexpr (std::is_integral_v<decltype(v)> && sizeof(Dst) < sizeof(v)) {
      if (int64_t(v) < lo || int64_t(v) > hi)
        return invalid_model(fmt::format("{}: {}[{}] = {} is out of range for {}", what, field_name,
                                         i, v, dtype_name(layout.dtype)));
    }
    out[i] = Dst(v);
  }
  normalize_bools(t);
  return t;
}

Result<Tensor> from_typed_fields(const TP& proto, const StoredLayout& layout, const std::string& what) {
  switch (layout.dtype) {
    case DType::kF32:
      return from_field<float>(layout, proto.float_data(), "float_data", what, 0, 0);
    case DType::kF64:
      return from_field<double>(layout, proto.double_data(), "double_data", what, 0, 0);
    case DType::kI64:
      return from_field<int64_t>(layout, proto.int64_data(), "int64_data", what, 0, 0);
    case DType::kI32:
      return from_field<int32_t>(layout, proto.int32_data(), "int32_data", what, 0, 0);
    case DType::kI8:
      return from_field<int8_t>(layout, proto.int32_data(), "int32_data", what, -128, 127);
    case DType::kU8:
      return from_field<uint8_t>(layout, proto.int32_data(), "int32_data", what, 0, 255);
    case DType::kBool:
      return from_field<uint8_t>(layout, proto.int32_data(), "int32_data", what, 0, 255);
    case DType::kI16:
      return from_field<int16_t>(layout, proto.int32_data(), "int32_data", what, -32768, 32767);
    case DType::kU16:
      return from_field<uint16_t>(layout, proto.int32_data(), "int32_data", what, 0, 65535);
    case DType::kU32:
      return from_field<uint32_t>(layout, proto.uint64_data(), "uint64_data", what, 0, 4294967295);
    case DType::kU64:
      return from_field<uint64_t>(layout, proto.uint64_data(), "uint64_data", what, 0, 0);
    default: {  // the small types: int32_data holds each byte (packed for the sub-byte ones)
      if (layout.bits == 8)
        return from_field<uint8_t>(layout, proto.int32_data(), "int32_data", what, 0, 255);
      std::string packed;
      for (int32_t v : proto.int32_data()) {
        if (v < 0 || v > 255) return invalid_model(fmt::format("{}: int32_data value {} is not a byte", what, v));
        packed.push_back(char(v));
      }
      return from_bytes(layout, std::as_bytes(std::span(packed.data(), packed.size())), "int32_data", what);
    }
    case DType::kF16:
    case DType::kBF16:  // the 16-bit patterns, one per int32_data entry
      return from_field<uint16_t>(layout, proto.int32_data(), "int32_data", what, 0, 65535);
  }
  return internal_error(fmt::format("{}: unhandled dtype", what));
}

Result<int64_t> parse_nonnegative(const std::string& text, const char* key,
                                  const std::string& what) {
  int64_t v = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 0)
    return invalid_model(
        fmt::format("{}: external data {} '{}' is not a non-negative integer", what, key, text));
  return v;
}

Result<Tensor> from_external(const TP& proto, const StoredLayout& layout, const std::string& base_dir,
                             const std::string& what) {
  std::string location;
  int64_t offset = 0;
  int64_t length = -1;
  for (const auto& entry : proto.external_data()) {
    if (entry.key() == "location") {
      location = entry.value();
    } else if (entry.key() == "offset") {
      STRIDER_ASSIGN_OR_RETURN(offset, parse_nonnegative(entry.value(), "offset", what));
    } else if (entry.key() == "length") {
      STRIDER_ASSIGN_OR_RETURN(length, parse_nonnegative(entry.value(), "length", what));
    }
  }
  if (length >= 0 && length != layout.bytes)
    return invalid_model(fmt::format("{}: external data length {} but {}{} needs {} bytes", what,
                                     length, dtype_name(layout.dtype),
                                     shape_to_string(layout.shape), layout.bytes));
  STRIDER_ASSIGN_OR_RETURN(auto bytes, onnx_io::read_external_data(base_dir, location, offset, layout.bytes, what));
  return from_bytes(layout, bytes, "external data", what);
}

}  // namespace

Result<Tensor> tensor_from_proto(const TP& proto, const std::string& base_dir,
                                 const std::string& what_in) {
  std::string what = describe(proto, what_in);
  STRIDER_ASSIGN_OR_RETURN(StoredLayout layout, layout_of(proto, what));
  if (proto.data_location() == TP::EXTERNAL) return from_external(proto, layout, base_dir, what);
  if (proto.has_raw_data()) {
    const std::string& raw = proto.raw_data();
    return from_bytes(layout, std::as_bytes(std::span(raw.data(), raw.size())), "raw_data", what);
  }
  return from_typed_fields(proto, layout, what);
}

TP tensor_to_proto(const Tensor& tensor, const std::string& name) {
  TP proto;
  proto.set_name(name);
  proto.set_data_type(onnx_type_from_dtype(tensor.dtype()));
  for (int64_t d : tensor.shape()) proto.add_dims(d);
  const int bits = small_type_bits(tensor.dtype());
  if (bits == 8) {
    proto.set_raw_data(reinterpret_cast<const char*>(tensor.bytes()), tensor.byte_size());
    return proto;
  }
  std::string packed(size_t((tensor.num_elements() * bits + 7) / 8), '\0');
  const int per_byte = 8 / bits;
  for (int64_t i = 0; i < tensor.num_elements(); ++i) {
    const uint8_t field = uint8_t(tensor.data<uint8_t>()[i] & ((1 << bits) - 1));
    packed[size_t(i / per_byte)] = char(uint8_t(packed[size_t(i / per_byte)]) | (field << ((i % per_byte) * bits)));
  }
  proto.set_raw_data(std::move(packed));
  return proto;
}

Result<Tensor> read_tensor_pb(const std::string& path) {
  std::string what = fmt::format("tensor file '{}'", path);
  STRIDER_ASSIGN_OR_RETURN(auto bytes, onnx_io::read_file(path, what));
  return parse_tensor_pb(bytes, onnx_io::parent_folder(path), what);
}

Result<Tensor> parse_tensor_pb(std::span<const std::byte> bytes, const std::string& base_dir, const std::string& what) {
  TP proto;
  if (bytes.size() > size_t(std::numeric_limits<int>::max()) ||
      !proto.ParseFromArray(bytes.data(), int(bytes.size())))
    return invalid_argument(fmt::format("{}: not a serialized ONNX TensorProto", what));
  Result<Tensor> tensor = tensor_from_proto(proto, base_dir, what);
  // Inside a standalone file a malformed tensor is bad caller input, not a bad model.
  if (!tensor.is_ok() && tensor.status().code() == StatusCode::kInvalidModel)
    return invalid_argument(tensor.status().message());
  return tensor;
}

Status write_tensor_pb(const std::string& path, const Tensor& tensor, const std::string& name) {
  std::string bytes;
  if (!tensor_to_proto(tensor, name).SerializeToString(&bytes))
    return internal_error(fmt::format("serializing tensor '{}' for '{}' failed", name, path));
  return onnx_io::write_file(path, std::as_bytes(std::span(bytes.data(), bytes.size())));
}

}  // namespace strider
