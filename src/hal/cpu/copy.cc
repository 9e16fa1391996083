#include "hal/cpu/copy.h"

#include <algorithm>
#include <cstring>
#include <immintrin.h>
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

template <size_t kBytes>
[[gnu::always_inline]] inline void copy_bytes(std::byte* dst, const std::byte* src) {
  std::memcpy(dst, src, kBytes);  // the caller's operands do not overlap
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
// its inputs and gives its outputs, or a channels-last value read as channels-first).
// Element order would touch one side with a large stride every element; tiles of about
// kTransposeTileElements keep both sides' lines in cache. A short contiguous dim (an
// image's 3 channels) takes a longer tile along the other, so each tile is still a few
// hundred elements: the copy then reads 3 planes side by side and writes one stream.
// Column strips of tiles are split over the worker's team. False (nothing copied) when the
// copy is not of that form.
constexpr int64_t kTransposeTileSide = 32;
constexpr int64_t kTransposeTileElements = 1024;

// dst[i * dst_i + j * dst_j] = src[i * src_i + j * src_j] for i < rows_i, j < rows_j, where
// dst is contiguous along i and src along j (dst_i == src_j == the word size). Rows > 0 fixes
// rows_i at compile time: an image's 3 channels interleave in an unrolled loop.
template <typename Word, int Rows = 0>
void transpose_scalar(std::byte* dst, int64_t dst_j, const std::byte* src, int64_t src_i, int64_t rows_i,
                      int64_t rows_j) {
  constexpr int64_t e = int64_t(sizeof(Word));
  const int64_t rows = Rows > 0 ? Rows : rows_i;
  for (int64_t j = 0; j < rows_j; ++j)
    for (int64_t i = 0; i < rows; ++i) {
      Word w;
      std::memcpy(&w, src + i * src_i + j * e, sizeof(Word));
      std::memcpy(dst + i * e + j * dst_j, &w, sizeof(Word));
    }
}

// An 8x8 block of 32-bit words: 8 rows of src (8 words each, `src_row` bytes apart) become
// the 8 columns of dst's rows (`dst_row` bytes apart), in registers (the usual unpack,
// shuffle and 128-bit lane permute of AVX2).
__attribute__((target("avx2"))) void transpose_8x8_words(std::byte* dst, int64_t dst_row, const std::byte* src,
                                                          int64_t src_row) {
  __m256 r[8], t[8], u[8];
  for (int k = 0; k < 8; ++k) r[k] = _mm256_loadu_ps(reinterpret_cast<const float*>(src + k * src_row));
  for (int k = 0; k < 8; k += 2) {
    t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]);
    t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
  }
  for (int k = 0; k < 8; k += 4) {
    u[k] = _mm256_shuffle_ps(t[k], t[k + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int k = 0; k < 4; ++k) {
    _mm256_storeu_ps(reinterpret_cast<float*>(dst + k * dst_row), _mm256_permute2f128_ps(u[k], u[k + 4], 0x20));
    _mm256_storeu_ps(reinterpret_cast<float*>(dst + (k + 4) * dst_row), _mm256_permute2f128_ps(u[k], u[k + 4], 0x31));
  }
}

const bool cpu_has_avx2 = __builtin_cpu_supports("avx2");
const bool cpu_has_avx512 = __builtin_cpu_supports("avx512f");

// Three rows of 32-bit words (an image's R, G and B planes, `src_row` bytes apart) into
// one interleaved row (RGBRGB...: a channels-last image's pixels), 16 pixels per step: two
// two-source permutes per 16 output words, where the scalar loop moved one word at a time
// (MobileNetV2's 224x224 upload: bench/copy_bench's image_nchw_to_nhwc cases). Returns how
// many pixels it did (a multiple of 16); the caller does the rest.
__attribute__((target("avx512f"))) int64_t interleave_3_rows(std::byte* dst, const std::byte* src, int64_t src_row,
                                                             int64_t pixels) {
  // Output word k (of 48 per step) is plane k % 3's pixel k / 3. First a and b's words
  // go to their places (index < 16: a, else b), then c's replace the third ones.
  alignas(64) int32_t ab[3][16], with_c[3][16];
  for (int o = 0; o < 3; ++o)
    for (int p = 0; p < 16; ++p) {
      const int k = 16 * o + p, plane = k % 3, pixel = k / 3;
      ab[o][p] = plane == 1 ? 16 + pixel : pixel;
      with_c[o][p] = plane == 2 ? 16 + pixel : p;
    }
  __m512i ab_index[3], c_index[3];
  for (int o = 0; o < 3; ++o) {
    ab_index[o] = _mm512_load_si512(ab[o]);
    c_index[o] = _mm512_load_si512(with_c[o]);
  }
  const float* r = reinterpret_cast<const float*>(src);
  const float* g = reinterpret_cast<const float*>(src + src_row);
  const float* b = reinterpret_cast<const float*>(src + 2 * src_row);
  float* out = reinterpret_cast<float*>(dst);
  int64_t j = 0;
  for (; j + 16 <= pixels; j += 16) {
    const __m512 vr = _mm512_loadu_ps(r + j), vg = _mm512_loadu_ps(g + j), vb = _mm512_loadu_ps(b + j);
    for (int o = 0; o < 3; ++o) {
      const __m512 two = _mm512_permutex2var_ps(vr, ab_index[o], vg);
      _mm512_storeu_ps(out + 3 * j + 16 * o, _mm512_permutex2var_ps(two, c_index[o], vb));
    }
  }
  return j;
}

template <typename Word>
void transpose_tile(std::byte* dst, int64_t dst_j, const std::byte* src, int64_t src_i, int64_t rows_i,
                    int64_t rows_j) {
  constexpr int64_t e = int64_t(sizeof(Word));
  if (sizeof(Word) == 4 && cpu_has_avx2 && rows_i >= 8 && rows_j >= 8) {
    const int64_t block_i = rows_i / 8 * 8, block_j = rows_j / 8 * 8;
    for (int64_t j = 0; j < block_j; j += 8)
      for (int64_t i = 0; i < block_i; i += 8)
        transpose_8x8_words(dst + i * e + j * dst_j, dst_j, src + i * src_i + j * e, src_i);
    transpose_scalar<Word>(dst + block_i * e, dst_j, src + block_i * src_i, src_i, rows_i - block_i, rows_j);
    transpose_scalar<Word>(dst + block_j * dst_j, dst_j, src + block_j * e, src_i, block_i, rows_j - block_j);
    return;
  }
  if (sizeof(Word) == 4 && cpu_has_avx512 && rows_i == 3 && dst_j == 3 * e) {
    const int64_t done = interleave_3_rows(dst, src, src_i, rows_j);
    return transpose_scalar<Word, 3>(dst + done * dst_j, dst_j, src + done * e, src_i, rows_i, rows_j - done);
  }
  switch (rows_i) {
    case 1: return transpose_scalar<Word, 1>(dst, dst_j, src, src_i, rows_i, rows_j);
    case 2: return transpose_scalar<Word, 2>(dst, dst_j, src, src_i, rows_i, rows_j);
    case 3: return transpose_scalar<Word, 3>(dst, dst_j, src, src_i, rows_i, rows_j);
    case 4: return transpose_scalar<Word, 4>(dst, dst_j, src, src_i, rows_i, rows_j);
    default: return transpose_scalar<Word>(dst, dst_j, src, src_i, rows_i, rows_j);
  }
}

template <typename Word>
bool copy_transposed(std::span<const int64_t> sizes, std::byte* dst, const int64_t* dst_strides, const std::byte* src,
                     const int64_t* src_strides) {
  const int64_t e = int64_t(sizeof(Word));
  size_t a = sizes.size(), b = sizes.size();  // dst's and src's contiguous dims
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] < 2) continue;
    if (dst_strides[d] == 1 && a == sizes.size()) a = d;
    if (src_strides[d] == 1 && b == sizes.size()) b = d;
  }
  if (a == sizes.size() || b == sizes.size() || a == b) return false;
  if (sizes[a] * sizes[b] < kTransposeTileSide * kTransposeTileSide / 4) return false;  // a small copy: element order
  std::vector<int64_t> outer_sizes, outer_dst, outer_src;
  for (size_t d = 0; d < sizes.size(); ++d)
    if (d != a && d != b) {
      outer_sizes.push_back(sizes[d]);
      outer_dst.push_back(dst_strides[d]);
      outer_src.push_back(src_strides[d]);
    }
  const int64_t dst_j = dst_strides[b] * e, src_i = src_strides[a] * e;
  const int64_t tile_i = std::min(sizes[a], kTransposeTileSide);
  const int64_t tile_j = std::min(sizes[b], std::max(kTransposeTileSide, kTransposeTileElements / tile_i));
  const int64_t strips = (sizes[b] + tile_j - 1) / tile_j, outer = num_elements(outer_sizes);
  parallel_for(outer * strips, sizes[a] * tile_j, [&](int64_t begin, int64_t end, int) {
    std::vector<int64_t> index = unflatten_index(begin / strips, outer_sizes);
    for (int64_t item = begin; item < end; ++item) {
      if (item != begin && item % strips == 0) advance_index(index, outer_sizes);
      std::byte* d0 = dst;
      const std::byte* s0 = src;
      for (size_t k = 0; k < index.size(); ++k) {
        d0 += index[k] * outer_dst[k] * e;
        s0 += index[k] * outer_src[k] * e;
      }
      const int64_t j = item % strips * tile_j, rows_j = std::min(tile_j, sizes[b] - j);
      for (int64_t i = 0; i < sizes[a]; i += tile_i)
        transpose_tile<Word>(d0 + i * e + j * dst_j, dst_j, s0 + i * src_i + j * e, src_i,
                             std::min(tile_i, sizes[a] - i), rows_j);
    }
  });
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
  auto copy_run_of = [element_size](const auto& p, int64_t n, const auto& s, bool disjoint) {
    if (s[0] == element_size && s[1] == element_size) {
      if (!disjoint) {
        std::memmove(p[0], p[1], size_t(n * element_size));
        return;
      }
      // Short runs (a channel slice of a channels-last tensor: 16 floats, then the next
      // pixel's) as fixed-size copies the compiler inlines: a library call per 64-byte run
      // made a 16-of-32-channel Materialize at 40x40 cost 8 us.
      switch (n * element_size) {
        case 16: return copy_bytes<16>(p[0], p[1]);
        case 32: return copy_bytes<32>(p[0], p[1]);
        case 64: return copy_bytes<64>(p[0], p[1]);
        case 128: return copy_bytes<128>(p[0], p[1]);
        case 256: return copy_bytes<256>(p[0], p[1]);
        default: std::memmove(p[0], p[1], size_t(n * element_size)); return;
      }
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
  if (overlap)
    return for_each_strided(sizes, ops, [&](const auto& p, int64_t n, const auto& s) { copy_run_of(p, n, s, false); });
  if (copy_transposed(sizes, dst, dst_strides, src, src_strides, element_size)) return;
  parallel_for_each_strided(sizes, ops, std::max<int64_t>(1, element_size / 4),
                            [&](const auto& p, int64_t n, const auto& s, int) { copy_run_of(p, n, s, true); });
}

void copy_view(const TensorView& dst, const TensorView& src) {
  STRIDER_CHECK(dst.sizes == src.sizes && dst.dtype == src.dtype, "copy {} <- {}", dst.to_string(),
                src.to_string());
  copy_strided(dst.sizes, dst.host_data(), dst.strides.data(), src.host_data(), src.strides.data(),
               dtype_size(dst.dtype));
}

}  // namespace strider::cpu
