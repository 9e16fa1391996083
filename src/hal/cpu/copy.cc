#include "hal/cpu/copy.h"

#include <algorithm>
#include <cstring>
#include <utility>

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

// The bytes [first, last] a strided operand touches.
std::pair<const std::byte*, const std::byte*> extent(std::span<const int64_t> sizes, const std::byte* base,
                                                     const int64_t* strides, int64_t element_size) {
  int64_t low = 0, high = 0;
  for (size_t d = 0; d < sizes.size(); ++d) (strides[d] < 0 ? low : high) += (sizes[d] - 1) * strides[d];
  return {base + low * element_size, base + high * element_size + element_size - 1};
}

}  // namespace

void copy_strided(std::span<const int64_t> sizes, std::byte* dst, const int64_t* dst_strides,
                  const std::byte* src, const int64_t* src_strides, int64_t element_size) {
  StridedOperands<2> ops;
  ops.base = {dst, const_cast<std::byte*>(src)};
  ops.strides = {dst_strides, src_strides};
  ops.element_size = {element_size, element_size};
  auto copy_run_of = [element_size](const auto& p, int64_t n, const auto& s) {
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
  };
  for (int64_t s : sizes)
    if (s == 0) return;
  // Split over the session's threads unless source and destination overlap (a shifted
  // copy within one buffer must run in order).
  auto [dst_first, dst_last] = extent(sizes, dst, dst_strides, element_size);
  auto [src_first, src_last] = extent(sizes, src, src_strides, element_size);
  bool overlap = dst_first <= src_last && src_first <= dst_last;
  if (overlap) return for_each_strided(sizes, ops, copy_run_of);
  parallel_for_each_strided(sizes, ops, std::max<int64_t>(1, element_size / 4),
                            [&](const auto& p, int64_t n, const auto& s, int) { copy_run_of(p, n, s); });
}

void copy_view(const TensorView& dst, const TensorView& src) {
  STRIDER_CHECK(dst.sizes == src.sizes && dst.dtype == src.dtype, "copy {} <- {}", dst.to_string(),
                src.to_string());
  copy_strided(dst.sizes, dst.host_data(), dst.strides.data(), src.host_data(), src.strides.data(),
               dtype_size(dst.dtype));
}

}  // namespace strider::cpu
