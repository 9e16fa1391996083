// The strided loop every CPU kernel of ours is built on.
//
// for_each_strided visits every element of an N-D index space once, for several operands
// that each have their own strides (zero for broadcast, negative for reversed views). It
// first drops size-1 dims and merges dims that are contiguous for every operand, so a
// dense tensor becomes one long run, then calls `run(pointers, count, byte_strides)` for
// each innermost run. Operands are visited in row-major order of the index space, which
// kernels that reduce or scan rely on.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/check.h"

namespace strider::cpu {

// Moves a row-major multi-index to the next position within `sizes` (wrapping to all zeros
// after the last one).
inline void advance_index(std::vector<int64_t>& index, std::span<const int64_t> sizes) {
  for (size_t d = index.size(); d-- > 0;) {
    if (++index[d] < sizes[d]) return;
    index[d] = 0;
  }
}

template <size_t N>
struct StridedOperands {
  std::array<std::byte*, N> base{};
  std::array<const int64_t*, N> strides{};  // element strides, one per dim of the space
  std::array<int64_t, N> element_size{};
};

// A loop nest after dropping size-1 dims and merging contiguous ones.
template <size_t N>
struct CollapsedLoop {
  std::vector<int64_t> sizes;                     // outermost first
  std::vector<std::array<int64_t, N>> strides;    // byte strides per dim and operand
};

template <size_t N>
CollapsedLoop<N> collapse_loop(std::span<const int64_t> sizes, const StridedOperands<N>& ops) {
  CollapsedLoop<N> loop;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;
    std::array<int64_t, N> s;
    for (size_t k = 0; k < N; ++k) s[k] = ops.strides[k][d] * ops.element_size[k];
    if (!loop.sizes.empty()) {
      bool mergeable = true;
      for (size_t k = 0; k < N; ++k)
        if (loop.strides.back()[k] != s[k] * sizes[d]) mergeable = false;
      if (mergeable) {
        loop.sizes.back() *= sizes[d];
        loop.strides.back() = s;
        continue;
      }
    }
    loop.sizes.push_back(sizes[d]);
    loop.strides.push_back(s);
  }
  return loop;
}

// RunFn: void(const std::array<std::byte*, N>& pointers, int64_t count,
//             const std::array<int64_t, N>& byte_strides)
template <size_t N, typename RunFn>
void for_each_strided(std::span<const int64_t> sizes, const StridedOperands<N>& ops, RunFn&& run) {
  for (int64_t s : sizes)
    if (s == 0) return;
  CollapsedLoop<N> loop = collapse_loop(sizes, ops);
  if (loop.sizes.empty()) {  // a single element
    run(ops.base, 1, std::array<int64_t, N>{});
    return;
  }
  const size_t rank = loop.sizes.size();
  const int64_t inner = loop.sizes.back();
  const std::array<int64_t, N> inner_strides = loop.strides.back();
  std::vector<int64_t> index(rank, 0);
  std::array<std::byte*, N> pointers = ops.base;
  while (true) {
    run(pointers, inner, inner_strides);
    // Advance the outer index (odometer), fixing pointers incrementally.
    size_t d = rank - 1;
    while (d-- > 0) {
      if (++index[d] < loop.sizes[d]) {
        for (size_t k = 0; k < N; ++k) pointers[k] += loop.strides[d][k];
        break;
      }
      for (size_t k = 0; k < N; ++k) pointers[k] -= loop.strides[d][k] * (loop.sizes[d] - 1);
      index[d] = 0;
    }
    if (d == size_t(-1)) return;
  }
}

}  // namespace strider::cpu
