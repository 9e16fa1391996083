// The strided loop every CPU kernel of ours is built on.
//
// for_each_strided visits every element of an N-D index space once, for several operands
// that each have their own strides (zero for broadcast, negative for reversed views). It
// first drops size-1 dims and merges dims that are contiguous for every operand, so a
// dense tensor becomes one long run, then calls `run(pointers, count, byte_strides)` for
// each innermost run. Operands are visited in row-major order of the index space, which
// kernels that reduce or scan rely on.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/check.h"
#include "hal/cpu/parallel.h"

namespace strider::cpu {

// Moves a row-major multi-index to the next position within `sizes` (wrapping to all zeros
// after the last one).
inline void advance_index(std::vector<int64_t>& index, std::span<const int64_t> sizes) {
  for (size_t d = index.size(); d-- > 0;) {
    if (++index[d] < sizes[d]) return;
    index[d] = 0;
  }
}

// The row-major multi-index of the `flat`-th position within `sizes`.
inline std::vector<int64_t> unflatten_index(int64_t flat, std::span<const int64_t> sizes) {
  std::vector<int64_t> index(sizes.size(), 0);
  for (size_t d = sizes.size(); d-- > 0;) {
    index[d] = flat % sizes[d];
    flat /= sizes[d];
  }
  return index;
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

// `order`: the dims from outermost to innermost (empty: 0, 1, ..., in order).
template <size_t N>
CollapsedLoop<N> collapse_loop(std::span<const int64_t> sizes, const StridedOperands<N>& ops,
                               std::span<const size_t> order = {}) {
  CollapsedLoop<N> loop;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const size_t d = order.empty() ? i : order[i];
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

// Visits the elements [begin, end) of `loop`'s row-major index space (begin < end), calling
// `run(pointers, count, byte_strides)` for each piece of an innermost run in that range.
template <size_t N, typename RunFn>
void for_each_strided_range(const CollapsedLoop<N>& loop, const std::array<std::byte*, N>& base, int64_t begin,
                            int64_t end, RunFn&& run) {
  const size_t rank = loop.sizes.size();
  const int64_t inner = loop.sizes.back();
  const std::array<int64_t, N> inner_strides = loop.strides.back();
  std::vector<int64_t> index(rank, 0);
  std::array<std::byte*, N> pointers = base;
  int64_t row = begin / inner, column = begin % inner;
  for (size_t d = rank - 1; d-- > 0;) {
    index[d] = row % loop.sizes[d];
    row /= loop.sizes[d];
    for (size_t k = 0; k < N; ++k) pointers[k] += index[d] * loop.strides[d][k];
  }
  int64_t remaining = end - begin;
  while (true) {
    const int64_t count = std::min(inner - column, remaining);
    std::array<std::byte*, N> at = pointers;
    for (size_t k = 0; k < N; ++k) at[k] += column * inner_strides[k];
    run(at, count, inner_strides);
    remaining -= count;
    column = 0;
    if (remaining == 0) return;
    // Advance the outer index (odometer), fixing pointers incrementally.
    for (size_t d = rank - 1; d-- > 0;) {
      if (++index[d] < loop.sizes[d]) {
        for (size_t k = 0; k < N; ++k) pointers[k] += loop.strides[d][k];
        break;
      }
      for (size_t k = 0; k < N; ++k) pointers[k] -= loop.strides[d][k] * (loop.sizes[d] - 1);
      index[d] = 0;
    }
  }
}

template <size_t N>
int64_t loop_elements(const CollapsedLoop<N>& loop) {
  int64_t total = 1;
  for (int64_t s : loop.sizes) total *= s;
  return total;
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
  for_each_strided_range(loop, ops.base, 0, loop_elements(loop), run);
}

// The dims ordered by the first operand's (the output's) byte stride, largest first (ties
// keep their order): visited in that order, the innermost run is the output's densest dim.
// A channels-last output [N, C, W] is then walked along C (stride 1), not along W (stride C).
template <size_t N>
std::vector<size_t> output_stride_order(std::span<const int64_t> sizes, const StridedOperands<N>& ops) {
  std::vector<size_t> order(sizes.size());
  for (size_t d = 0; d < order.size(); ++d) order[d] = d;
  auto stride = [&](size_t d) { return ops.strides[0][d] < 0 ? -ops.strides[0][d] : ops.strides[0][d]; };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return stride(a) > stride(b); });
  return order;
}

// for_each_strided with the elements split over the session's threads (hal/cpu/parallel.h)
// by `work_per_element`: for kernels whose elements are independent of each other (no
// reduction or scan over the visiting order), which are therefore visited in the output's
// memory order (output_stride_order), not row-major. RunFn also takes the thread's index,
// for per-thread scratch: run(pointers, count, byte_strides, thread); and `done(thread)`
// follows a thread's last run (for a kernel that batches runs before computing them).
struct NoDone {
  void operator()(int) const {}
};
template <size_t N, typename RunFn, typename DoneFn = NoDone>
void parallel_for_each_strided(std::span<const int64_t> sizes, const StridedOperands<N>& ops,
                               int64_t work_per_element, RunFn&& run, int cap = 1 << 30, DoneFn&& done = {}) {
  for (int64_t s : sizes)
    if (s == 0) return;
  const std::vector<size_t> order = output_stride_order(sizes, ops);
  CollapsedLoop<N> loop = collapse_loop(sizes, ops, order);
  if (loop.sizes.empty()) {
    run(ops.base, 1, std::array<int64_t, N>{}, 0);
    done(0);
    return;
  }
  parallel_for(loop_elements(loop), work_per_element, [&](int64_t begin, int64_t end, int thread) {
    for_each_strided_range(loop, ops.base, begin, end,
                           [&](const std::array<std::byte*, N>& p, int64_t n, const std::array<int64_t, N>& s) {
                             run(p, n, s, thread);
                           });
    done(thread);
  }, cap);
}

// parallel_for_each_strided with the row function behind a plain function pointer:
// `row(context, pointers, count, byte_strides)`. Kernel templates instantiated for many
// functor x dtype pairs (the elementwise maps, Cast) call this, so the loop nest and its
// OpenMP region are compiled once per operand count (strided_loop.cc), not once per
// kernel: 400 copies of them made the elementwise kernels take minutes to compile under
// the sanitizers. One indirect call per innermost run costs nothing next to the run.
template <size_t N>
using StridedRow = void (*)(const void* context, const std::array<std::byte*, N>& pointers, int64_t count,
                            const std::array<int64_t, N>& byte_strides);

inline constexpr size_t kMaxStridedRowOperands = 6;

template <size_t N>
void parallel_for_each_strided_row(std::span<const int64_t> sizes, const StridedOperands<N>& ops,
                                   int64_t work_per_element, StridedRow<N> row, const void* context) {
  static_assert(N >= 2 && N <= kMaxStridedRowOperands, "instantiated in strided_loop.cc for 2..6 operands");
  parallel_for_each_strided(sizes, ops, work_per_element,
                            [row, context](const std::array<std::byte*, N>& p, int64_t n,
                                           const std::array<int64_t, N>& s, int) { row(context, p, n, s); });
}
#define STRIDER_STRIDED_ROW(N)                                                                         \
  extern template void parallel_for_each_strided_row<N>(std::span<const int64_t>, const StridedOperands<N>&, \
                                                        int64_t, StridedRow<N>, const void*);
STRIDER_STRIDED_ROW(2)
STRIDER_STRIDED_ROW(3)
STRIDER_STRIDED_ROW(4)
STRIDER_STRIDED_ROW(5)
STRIDER_STRIDED_ROW(6)
#undef STRIDER_STRIDED_ROW

}  // namespace strider::cpu
