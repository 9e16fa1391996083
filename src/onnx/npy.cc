#include "onnx/npy.h"

#include <fmt/format.h>

#include <cctype>
#include <cstring>
#include <string_view>

#include "base/checked_math.h"
#include "base/shape.h"
#include "onnx/file_io.h"

namespace strider {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  bool has_descr = false, has_order = false, has_shape = false;
  Shape shape;
};

// A parser for the Python dict literal numpy writes: {'descr': '<f4', 'fortran_order':
// False, 'shape': (2, 3), }. Errors are plain strings; the caller adds the file name.
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : text_(text) {}

  std::string parse(NpyHeader* header) {
    if (!eat('{')) return "header is not a dict";
    while (true) {
      if (eat('}')) break;
      std::string key;
      if (!string_literal(&key)) return "expected a quoted key in the header";
      if (!eat(':')) return fmt::format("expected ':' after '{}'", key);
      std::string error = value(key, header);
      if (!error.empty()) return error;
      if (eat(',')) continue;
      if (eat('}')) break;
      return "expected ',' or '}' in the header";
    }
    if (!header->has_descr || !header->has_order || !header->has_shape)
      return "header lacks one of 'descr', 'fortran_order', 'shape'";
    return {};
  }

 private:
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool eat(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) return ++pos_, true;
    return false;
  }
  bool eat_word(std::string_view word) {
    skip_space();
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }
  bool string_literal(std::string* out) {
    skip_space();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) return false;
    char quote = text_[pos_++];
    size_t end = text_.find(quote, pos_);
    if (end == std::string_view::npos) return false;
    *out = std::string(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return true;
  }
  bool integer(int64_t* out) {
    skip_space();
    size_t start = pos_;
    int64_t v = 0;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      if (v > (kMaxTensorBytes - 9) / 10) return false;
      v = v * 10 + (text_[pos_++] - '0');
    }
    if (pos_ == start) return false;
    if (pos_ < text_.size() && text_[pos_] == 'L') ++pos_;  // Python 2 longs
    *out = v;
    return true;
  }
  std::string shape_tuple(Shape* shape) {
    if (!eat('(')) return "'shape' is not a tuple";
    while (!eat(')')) {
      int64_t d = 0;
      if (!integer(&d)) return "'shape' holds something other than non-negative integers";
      shape->push_back(d);
      if (!eat(',') && !(skip_space(), pos_ < text_.size() && text_[pos_] == ')'))
        return "malformed 'shape' tuple";
    }
    return {};
  }
  std::string value(const std::string& key, NpyHeader* h) {
    if (key == "descr") {
      skip_space();
      if (pos_ < text_.size() && text_[pos_] == '[') return "structured dtypes are not supported";
      if (!string_literal(&h->descr)) return "'descr' is not a string";
      h->has_descr = true;
    } else if (key == "fortran_order") {
      if (eat_word("True"))
        h->fortran_order = true;
      else if (eat_word("False"))
        h->fortran_order = false;
      else
        return "'fortran_order' is neither True nor False";
      h->has_order = true;
    } else if (key == "shape") {
      std::string error = shape_tuple(&h->shape);
      if (!error.empty()) return error;
      h->has_shape = true;
    } else {
      return fmt::format("unexpected header key '{}'", key);
    }
    return {};
  }

  std::string_view text_;
  size_t pos_ = 0;
};

std::optional<DType> dtype_from_descr(const std::string& descr) {
  if (descr.size() < 2) return std::nullopt;
  char order = descr[0];
  std::string_view kind = std::string_view(descr).substr(1);
  bool one_byte = kind == "i1" || kind == "u1" || kind == "b1";
  if (order != '<' && order != '=' && !(one_byte && (order == '|' || order == '>')))
    return std::nullopt;
  if (kind == "f4") return DType::kF32;
  if (kind == "f8") return DType::kF64;
  if (kind == "f2") return DType::kF16;
  if (kind == "i8") return DType::kI64;
  if (kind == "i4") return DType::kI32;
  if (kind == "i1") return DType::kI8;
  if (kind == "u1") return DType::kU8;
  if (kind == "i2") return DType::kI16;
  if (kind == "u2") return DType::kU16;
  if (kind == "u4") return DType::kU32;
  if (kind == "u8") return DType::kU64;
  if (kind == "b1") return DType::kBool;
  return std::nullopt;
}

const char* descr_of(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "<f4";
    case DType::kF64:
      return "<f8";
    case DType::kF16:
      return "<f2";
    case DType::kI64:
      return "<i8";
    case DType::kI32:
      return "<i4";
    case DType::kI8:
      return "|i1";
    case DType::kU8:
      return "|u1";
    case DType::kBool:
      return "|b1";
    case DType::kI16:
      return "<i2";
    case DType::kU16:
      return "<u2";
    case DType::kU32:
      return "<u4";
    case DType::kU64:
      return "<u8";
    case DType::kBF16:
      return nullptr;
    default:  // float8, float4 and the sub-byte integers have no numpy type
      return nullptr;
  }
  return nullptr;
}

uint32_t read_le(const std::byte* p, int bytes) {
  uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | uint32_t(p[i]);
  return v;
}

// Splits the file into its header text and its data, checking the preamble.
Status split_file(std::span<const std::byte> file, const std::string& what,
                  std::string_view* header, std::span<const std::byte>* data) {
  if (file.size() < kMagicSize + 4 || std::memcmp(file.data(), kMagic, kMagicSize) != 0)
    return invalid_argument(fmt::format("{}: not a .npy file (bad magic or too short)", what));
  int major = int(file[6]);
  if (major < 1 || major > 3)
    return invalid_argument(
        fmt::format("{}: unknown .npy format version {}.{}", what, major, int(file[7])));
  size_t len_bytes = major == 1 ? 2 : 4;
  if (file.size() < 8 + len_bytes)
    return invalid_argument(fmt::format("{}: truncated .npy header", what));
  size_t header_len = read_le(file.data() + 8, int(len_bytes));
  size_t start = 8 + len_bytes;
  if (header_len > file.size() - start)
    return invalid_argument(fmt::format("{}: truncated .npy header ({} bytes promised, {} present)",
                                        what, header_len, file.size() - start));
  *header = std::string_view(reinterpret_cast<const char*>(file.data() + start), header_len);
  *data = file.subspan(start + header_len);
  return Status::ok();
}

// Fortran (column-major) data -> row-major Tensor.
void transpose_from_fortran(const std::byte* src, Tensor& t) {
  const Shape& shape = t.shape();
  size_t rank = shape.size();
  int64_t esize = dtype_size(t.dtype());
  Strides src_strides(rank);  // column-major element strides
  int64_t running = 1;
  for (size_t k = 0; k < rank; ++k) src_strides[k] = running, running *= shape[k];
  std::vector<int64_t> index(rank, 0);
  int64_t src_offset = 0;
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    std::memcpy(t.bytes() + i * esize, src + src_offset * esize, size_t(esize));
    for (size_t k = rank; k-- > 0;) {  // row-major increment of the multi-index
      src_offset += src_strides[k];
      if (++index[k] < shape[k]) break;
      src_offset -= src_strides[k] * shape[k];
      index[k] = 0;
    }
  }
}

Result<int64_t> checked_bytes(const Shape& shape, DType dtype, const std::string& what) {
  std::optional<int64_t> count = checked_element_count(shape, dtype_size(dtype));
  if (!count) return invalid_argument(fmt::format("{}: shape {} is too large", what, shape_to_string(shape)));
  return *count * dtype_size(dtype);
}

}  // namespace

Result<Tensor> read_npy(const std::string& path) {
  std::string what = fmt::format("npy file '{}'", path);
  STRIDER_ASSIGN_OR_RETURN(auto file, onnx_io::read_file(path, what));
  return parse_npy(file, what);
}

Result<Tensor> parse_npy(std::span<const std::byte> file, const std::string& what) {
  std::string_view header_text;
  std::span<const std::byte> data;
  STRIDER_RETURN_IF_ERROR(split_file(file, what, &header_text, &data));
  NpyHeader header;
  std::string error = HeaderParser(header_text).parse(&header);
  if (!error.empty()) {
    if (error.starts_with("structured")) return unsupported(fmt::format("{}: {}", what, error));
    return invalid_argument(fmt::format("{}: {}", what, error));
  }
  std::optional<DType> dtype = dtype_from_descr(header.descr);
  if (!dtype) {
    if (!header.descr.empty() && header.descr[0] == '>')
      return unsupported(
          fmt::format("{}: big-endian dtype '{}' is not supported; save it "
                      "little-endian",
                      what, header.descr));
    return unsupported(
        fmt::format("{}: dtype '{}' is not supported (supported: <f4 <f8 <f2 "
                    "<i8 <i4 |i1 |u1 |b1)",
                    what, header.descr));
  }
  STRIDER_ASSIGN_OR_RETURN(int64_t bytes, checked_bytes(header.shape, *dtype, what));
  if (int64_t(data.size()) != bytes)
    return invalid_argument(fmt::format("{}: {}{} needs {} data bytes, the file has {}{}", what,
                                        dtype_name(*dtype), shape_to_string(header.shape), bytes,
                                        data.size(),
                                        int64_t(data.size()) < bytes ? " (truncated?)" : ""));
  Tensor t(*dtype, header.shape);
  if (header.fortran_order) {
    transpose_from_fortran(data.data(), t);
  } else if (bytes > 0) {
    std::memcpy(t.bytes(), data.data(), size_t(bytes));
  }
  if (t.dtype() == DType::kBool)
    for (int64_t i = 0; i < t.num_elements(); ++i) t.data<uint8_t>()[i] = t.data<uint8_t>()[i] != 0;
  return t;
}

Status write_npy(const std::string& path, const Tensor& tensor) {
  const char* descr = descr_of(tensor.dtype());
  if (descr == nullptr)
    return unsupported(fmt::format("npy file '{}': {} has no NumPy dtype; convert to f32 first",
                                   path, dtype_name(tensor.dtype())));
  std::string shape = "(";
  for (size_t i = 0; i < tensor.shape().size(); ++i)
    shape += fmt::format("{}{}", i ? ", " : "", tensor.shape()[i]);
  shape += tensor.shape().size() == 1 ? ",)" : ")";
  std::string header =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descr, shape);
  // numpy pads with spaces and a newline so the data starts 64-byte aligned.
  size_t preamble = header.size() + 64 > 65535 ? 12 : 10;  // 2.0 when the length needs 4 bytes
  size_t total = (preamble + header.size() + 1 + 63) / 64 * 64;
  header.append(total - preamble - header.size() - 1, ' ');
  header += '\n';
  std::string file(kMagic, kMagicSize);
  file += char(preamble == 10 ? 1 : 2);
  file += char(0);
  for (size_t i = 0; i < preamble - 8; ++i) file += char((header.size() >> (8 * i)) & 0xff);
  file += header;
  file.append(reinterpret_cast<const char*>(tensor.bytes()), tensor.byte_size());
  return onnx_io::write_file(path, std::as_bytes(std::span(file.data(), file.size())));
}

}  // namespace strider
