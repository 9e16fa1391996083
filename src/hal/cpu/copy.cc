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

// A copy whose destination's contiguous dim is strided in the source while another dim is
// the source's contiguous one: a transpose (NCHW <-> NHWC when a channels-last plan takes
// its inputs and gives its outputs). Element order would touch one side with a large stride
// every element; kTransposeTile x kTransposeTile tiles keep both sides' lines in cache.
// False (nothing copied) when the copy is not of that form.
constexpr int64_t kTransposeTile = 16;

template <typename Word>
void transpose_tile(std::byte* dst, int64_t dst_i, int64_t dst_j, const std::byte* src, int64_t src_i, int64_t src_j,
                    int64_t rows_i, int64_t rows_j) {
  for (int64_t j = 0; j < rows_j; ++j)
    for (int64_t i = 0; i < rows_i; ++i) {
      Word w;
      std::memcpy(&w, src + i * src_i + j * src_j, sizeof(Word));
      std::memcpy(dst + i * dst_i + j * dst_j, &w, sizeof(Word));
    }
}

template <typename Word>
bool copy_transposed(std::span<const int64_t> sizes, std::byte* dst, const int64_t* dst_strides, const std::byte* src,
                     const int64_t* src_strides) {
  const int64_t e = int64_t(sizeof(Word));
  size_t a = sizes.size(), b = sizes.size();  // dst's and src's contiguous dims
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] < kTransposeTile) continue;
    if (dst_strides[d] == 1 && a == sizes.size()) a = d;
    if (src_strides[d] == 1 && b == sizes.size()) b = d;
  }
  if (a == sizes.size() || b == sizes.size() || a == b) return false;
  std::vector<int64_t> outer_sizes, outer_dst, outer_src;
  for (size_t d = 0; d < sizes.size(); ++d)
    if (d != a && d != b) {
      outer_sizes.push_back(sizes[d]);
      outer_dst.push_back(dst_strides[d]);
      outer_src.push_back(src_strides[d]);
    }
  const int64_t dst_i = e, dst_j = dst_strides[b] * e, src_i = src_strides[a] * e, src_j = e;
  std::vector<int64_t> index(outer_sizes.size(), 0);
  for (int64_t n = num_elements(outer_sizes); n-- > 0; advance_index(index, outer_sizes)) {
    std::byte* d0 = dst;
    const std::byte* s0 = src;
    for (size_t k = 0; k < index.size(); ++k) {
      d0 += index[k] * outer_dst[k] * e;
      s0 += index[k] * outer_src[k] * e;
    }
    for (int64_t j = 0; j < sizes[b]; j += kTransposeTile)
      for (int64_t i = 0; i < sizes[a]; i += kTransposeTile)
        transpose_tile<Word>(d0 + i * dst_i + j * dst_j, dst_i, dst_j, s0 + i * src_i + j * src_j, src_i, src_j,
                             std::min(kTransposeTile, sizes[a] - i), std::min(kTransposeTile, sizes[b] - j));
  }
  return true;
}

bool copy_transposed(std::span<const int64_t> sizes, std::byte* dst, const int64_t* dst_strides, const std::byte* src,
                     const int64_t* src_strides, int64_t element_size) {
  switch (element_size) {
    case 2: return copy_transposed<uint16_t>(sizes, dst, dst_strides, src, src_strides);
    case 4: return copy_transposed<uint32_t>(sizes, dst, dst_strides, src, src_strides);
    case 8: return copy_transposed<uint64_t>(sizes, dst, dst_strides, src, src_strides);
    default: return false;
  }
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
  // On the caller's thread (an upload or a download), a transpose goes tile by tile; a
  // queue's worker splits the copy over its team instead.
  if (!thread_starts_teams && copy_transposed(sizes, dst, dst_strides, src, src_strides, element_size)) return;
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
