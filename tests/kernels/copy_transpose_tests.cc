// The CPU's strided copy when it is a transpose (hal/cpu/copy.cc: register-blocked 8x8
// blocks of 32-bit words, short contiguous dims interleaved, strips split over a team):
// every element lands where a plain element loop puts it, nothing outside the
// destination's elements is written, for sizes that leave remainders on both sides of the
// blocks, for 2-, 4- and 8-byte words, on the caller's thread and inside a worker's team.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "hal/cpu/copy.h"
#include "hal/cpu/parallel.h"

namespace strider::cpu {
namespace {

constexpr uint8_t kPoison = 0x5A;

struct TransposeCase {
  std::vector<int64_t> sizes;   // logical sizes
  std::vector<int> dst_order;   // dst's dims from outermost to innermost storage
  std::vector<int> src_order;   // src's the same
  int64_t pad;                  // extra elements between dst's rows (a view inside a wider buffer)
};

// Strides for `order` (outermost first), with `pad` elements after each innermost row.
std::vector<int64_t> strides_for(const std::vector<int64_t>& sizes, const std::vector<int>& order, int64_t pad,
                                 int64_t* span) {
  std::vector<int64_t> strides(sizes.size());
  int64_t step = 1;
  for (size_t k = order.size(); k-- > 0;) {
    strides[size_t(order[k])] = step;
    step *= sizes[size_t(order[k])] + (k + 1 == order.size() ? pad : 0);
  }
  *span = step;
  return strides;
}

template <typename Word>
void check_case(const TransposeCase& c, std::mt19937& rng, bool in_team) {
  int64_t dst_span = 0, src_span = 0;
  auto dst_strides = strides_for(c.sizes, c.dst_order, c.pad, &dst_span);
  auto src_strides = strides_for(c.sizes, c.src_order, 0, &src_span);
  std::vector<Word> src(static_cast<size_t>(src_span));
  for (Word& w : src) w = Word(rng());
  std::vector<Word> got(static_cast<size_t>(dst_span)), want(static_cast<size_t>(dst_span));
  std::memset(got.data(), kPoison, got.size() * sizeof(Word));
  std::memset(want.data(), kPoison, want.size() * sizeof(Word));
  std::vector<int64_t> index(c.sizes.size(), 0);
  int64_t elements = 1;
  for (int64_t s : c.sizes) elements *= s;
  for (int64_t n = 0; n < elements; ++n) {
    int64_t d = 0, s = 0;
    for (size_t k = 0; k < index.size(); ++k) {
      d += index[k] * dst_strides[k];
      s += index[k] * src_strides[k];
    }
    want[size_t(d)] = src[size_t(s)];
    for (size_t k = index.size(); k-- > 0;)
      if (++index[k] < c.sizes[k]) break; else index[k] = 0;
  }
  auto copy = [&] {
    copy_strided(c.sizes, reinterpret_cast<std::byte*>(got.data()), dst_strides.data(),
                 reinterpret_cast<const std::byte*>(src.data()), src_strides.data(), int64_t(sizeof(Word)));
  };
  if (in_team) {
    // As a queue's worker: allowed to start a two-thread team, with a low work minimum so
    // these small copies are split.
    thread_starts_teams = true;
    thread_min_work_per_thread = 64;
    omp_set_num_threads(2);
    copy();
    thread_starts_teams = false;
    thread_min_work_per_thread = kMinWorkPerThread;
  } else {
    copy();
  }
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_EQ(got[i], want[i]) << "element " << i << " of " << want.size() << ", word " << sizeof(Word)
                               << " bytes, team " << in_team;
}

const std::vector<TransposeCase>& cases() {
  static const std::vector<TransposeCase> all = {
      {{1, 3, 37, 45}, {0, 2, 3, 1}, {0, 1, 2, 3}, 0},     // an image uploaded NCHW into NHWC
      {{2, 3, 7, 101}, {0, 2, 3, 1}, {0, 1, 2, 3}, 0},     // rows long enough to tile: 16 pixels a step, then a tail
      {{2, 5, 9, 13}, {0, 2, 3, 1}, {0, 1, 2, 3}, 1},      // 5 channels, padded rows
      {{1, 144, 203}, {0, 1, 2}, {0, 2, 1}, 7},            // a head's NHWC values into an NCHW concat slice
      {{1, 67, 21, 19}, {0, 1, 2, 3}, {0, 2, 3, 1}, 0},    // NHWC -> NCHW, remainders on both sides
      {{3, 16, 24}, {0, 2, 1}, {0, 1, 2}, 0},              // exact 8x8 blocks, an outer dim
      {{2, 2, 300}, {0, 2, 1}, {0, 1, 2}, 3},              // two rows interleaved
      {{4, 9, 8, 17}, {1, 0, 3, 2}, {0, 1, 2, 3}, 2},      // two transposed pairs
  };
  return all;
}

TEST(CopyTranspose, EveryElementWhereAnElementLoopPutsItAndNothingElseWritten) {
  std::mt19937 rng(20261202);
  for (bool in_team : {false, true})
    for (const TransposeCase& c : cases()) {
      SCOPED_TRACE(::testing::Message() << "case with " << c.sizes.size() << " dims, first size " << c.sizes[1]);
      check_case<uint16_t>(c, rng, in_team);
      check_case<uint32_t>(c, rng, in_team);
      check_case<uint64_t>(c, rng, in_team);
    }
}

}  // namespace
}  // namespace strider::cpu
