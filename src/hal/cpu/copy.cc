#include "hal/cpu/copy.h"

#include <cstring>

#include "hal/cpu/strided_loop.h"

namespace strider::cpu {
namespace {

template <typename Word>
void copy_run(std::byte* dst, int64_t dst_stride, const std::byte* src, int64_t src_stride,
              int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    Word w;
    std::memcpy(&w, src + i * src_stride, sizeof(Word));
    std::memcpy(dst + i * dst_stride, &w, sizeof(Word));
  }
}

}  // namespace

void copy_strided(std::span<const int64_t> sizes, std::byte* dst, const int64_t* dst_strides,
                  const std::byte* src, const int64_t* src_strides, int64_t element_size) {
  StridedOperands<2> ops;
  ops.base = {dst, const_cast<std::byte*>(src)};
  ops.strides = {dst_strides, src_strides};
  ops.element_size = {element_size, element_size};
  for_each_strided(sizes, ops, [element_size](const auto& p, int64_t n, const auto& s) {
    if (s[0] == element_size && s[1] == element_size) {
      std::memmove(p[0], p[1], size_t(n * element_size));
      return;
    }
    switch (element_size) {
      case 1: copy_run<uint8_t>(p[0], s[0], p[1], s[1], n); break;
      case 2: copy_run<uint16_t>(p[0], s[0], p[1], s[1], n); break;
      case 4: copy_run<uint32_t>(p[0], s[0], p[1], s[1], n); break;
      case 8: copy_run<uint64_t>(p[0], s[0], p[1], s[1], n); break;
      default: STRIDER_CHECK(false, "element size {}", element_size);
    }
  });
}

void copy_view(const TensorView& dst, const TensorView& src) {
  STRIDER_CHECK(dst.sizes == src.sizes && dst.dtype == src.dtype, "copy {} <- {}", dst.to_string(),
                src.to_string());
  copy_strided(dst.sizes, dst.host_data(), dst.strides.data(), src.host_data(), src.strides.data(),
               dtype_size(dst.dtype));
}

}  // namespace strider::cpu
