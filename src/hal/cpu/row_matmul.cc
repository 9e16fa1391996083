// The one-row product (row_matmul.h): B packed in column blocks of 16, four blocks a pass.
#include "hal/cpu/row_matmul.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "hal/cpu/parallel.h"
#include "hal/cpu/vector_math.h"

namespace strider::cpu {
namespace {

constexpr int64_t kRowBlock = 16;  // columns of a block: one AVX-512 vector, two AVX2 ones

// What a pass stores: out[n * out_stride] = scale * sum + bias[n * bias_stride] (bias may be null).
struct RowStore {
  float* out;
  int64_t out_stride;
  const float* bias;
  int64_t bias_stride;
  float scale;
  int64_t n;  // the columns that exist (the last block's padding is not stored)
};

inline __attribute__((always_inline)) void store_block(const float* sums, int64_t block, const RowStore& s) {
  for (int64_t j = 0; j < kRowBlock; ++j) {
    const int64_t column = block * kRowBlock + j;
    if (column >= s.n) return;
    const float bias = s.bias ? s.bias[column * s.bias_stride] : 0.0f;
    s.out[column * s.out_stride] = s.scale * sums[j] + bias;
  }
}

// Blocks [begin, end) of the packed B times the dense row a of k values.
inline __attribute__((always_inline)) void row_blocks(const float* a, const float* packed, int64_t k, int64_t begin,
                                                      int64_t end, const RowStore& s) {
  int64_t block = begin;
  for (; block + 4 <= end; block += 4) {
    float sums[4][kRowBlock] = {};
    const float* b = packed + block * k * kRowBlock;
    for (int64_t i = 0; i < k; ++i) {
      const float x = a[i];
#pragma omp simd
      for (int64_t j = 0; j < kRowBlock; ++j) {
        sums[0][j] += x * b[i * kRowBlock + j];
        sums[1][j] += x * b[(k + i) * kRowBlock + j];
        sums[2][j] += x * b[(2 * k + i) * kRowBlock + j];
        sums[3][j] += x * b[(3 * k + i) * kRowBlock + j];
      }
    }
    for (int64_t q = 0; q < 4; ++q) store_block(sums[q], block + q, s);
  }
  for (; block < end; ++block) {
    float sums[kRowBlock] = {};
    const float* b = packed + block * k * kRowBlock;
    for (int64_t i = 0; i < k; ++i) {
      const float x = a[i];
#pragma omp simd
      for (int64_t j = 0; j < kRowBlock; ++j) sums[j] += x * b[i * kRowBlock + j];
    }
    store_block(sums, block, s);
  }
}

// The same loop per instruction set, in each compiler's words (vector_math.cc says why).
#if defined(__clang__)
#define STRIDER_AVX512 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma"), min_vector_width(512)))
#else
#define STRIDER_AVX512 __attribute__((target("arch=x86-64-v4,prefer-vector-width=512")))
#endif
STRIDER_AVX512 void row_blocks_avx512(const float* a, const float* packed, int64_t k, int64_t begin, int64_t end,
                                      const RowStore& s) {
  row_blocks(a, packed, k, begin, end, s);
}
__attribute__((target("avx2,fma"))) void row_blocks_avx2(const float* a, const float* packed, int64_t k, int64_t begin,
                                                         int64_t end, const RowStore& s) {
  row_blocks(a, packed, k, begin, end, s);
}
void row_blocks_baseline(const float* a, const float* packed, int64_t k, int64_t begin, int64_t end, const RowStore& s) {
  row_blocks(a, packed, k, begin, end, s);
}
#undef STRIDER_AVX512

using RowBlocks = void (*)(const float*, const float*, int64_t, int64_t, int64_t, const RowStore&);
RowBlocks chosen_row_blocks() {
  using vector_math::VectorIsa;
  if (vector_math::cpu_has(VectorIsa::kAvx512)) return row_blocks_avx512;
  if (vector_math::cpu_has(VectorIsa::kAvx2Fma)) return row_blocks_avx2;
  return row_blocks_baseline;
}

const float* f32_data(const TensorView& v) {
  return reinterpret_cast<const float*>(v.allocation->address() + v.byte_offset);
}

bool leading_dims_one(const TensorView& v, size_t kept) {
  for (size_t d = 0; d + kept < v.sizes.size(); ++d)
    if (v.sizes[d] != 1) return false;
  return true;
}

class RowMatMul final : public Kernel {
 public:
  RowMatMul(const MatMulViews& v, const TensorView* bias, float scale) : v_(v), scale_(scale), rows_(chosen_row_blocks()) {
    if (bias) bias_ = *bias;
    k_ = v.a.sizes.back();
    n_ = v.out.sizes.back();
    blocks_ = (n_ + kRowBlock - 1) / kRowBlock;
    // B [K, N] (leading unit dims) into [blocks][K][16], zeros past N.
    const float* b = f32_data(v.b);
    const int64_t row = v.b.strides[v.b.rank() - 2], column = v.b.strides.back();
    packed_.assign(size_t(blocks_ * k_ * kRowBlock), 0.0f);
    for (int64_t n = 0; n < n_; ++n)
      for (int64_t i = 0; i < k_; ++i)
        packed_[size_t(((n / kRowBlock) * k_ + i) * kRowBlock + n % kRowBlock)] = b[i * row + n * column];
  }
  Status run(const QueueContext&) override {
    const int64_t a_stride = v_.a.strides.back();
    const float* a = f32_data(v_.a);
    RowStore s{reinterpret_cast<float*>(v_.out.allocation->address() + v_.out.byte_offset), v_.out.strides.back(),
               bias_ ? f32_data(*bias_) : nullptr, bias_ && bias_->sizes.back() > 1 ? bias_->strides.back() : 0, scale_, n_};
    parallel_for(blocks_, k_ * kRowBlock, [&](int64_t begin, int64_t end, int) {
      if (a_stride == 1) return rows_(a, packed_.data(), k_, begin, end, s);
      std::vector<float> dense(static_cast<size_t>(k_));  // a strided row, gathered once per thread
      for (int64_t i = 0; i < k_; ++i) dense[size_t(i)] = a[i * a_stride];
      rows_(dense.data(), packed_.data(), k_, begin, end, s);
    });
    return Status::ok();
  }
  std::string implementation() const override {
    return fmt::format("strider-cpu:row-matmul (weights packed once, {} bytes)", packed_.size() * sizeof(float));
  }

 private:
  MatMulViews v_;
  std::optional<TensorView> bias_;
  float scale_;
  RowBlocks rows_;
  int64_t k_ = 0, n_ = 0, blocks_ = 0;
  std::vector<float> packed_;
};

}  // namespace

Status row_matmul_applies(const MatMulViews& v, const TensorView* bias) {
  for (const TensorView* view : {&v.a, &v.b, &v.out})
    if (view->dtype != DType::kF32 || view->rank() < 2) return unsupported("row matmul: f32 views of rank 2 or more only");
  if (bias && (bias->dtype != DType::kF32 || bias->rank() < 1)) return unsupported("row matmul: an f32 bias only");
  if (!leading_dims_one(v.a, 1) || !leading_dims_one(v.out, 1) || !leading_dims_one(v.b, 2))
    return unsupported("row matmul: one row times one matrix only");
  const int64_t k = v.a.sizes.back(), n = v.out.sizes.back();
  if (k < 1 || n < 1 || v.b.sizes[v.b.rank() - 2] != k || v.b.sizes.back() != n) return unsupported("row matmul: sizes");
  if (bias && ((bias->sizes.back() != n && bias->sizes.back() != 1) || !leading_dims_one(*bias, 1)))
    return unsupported("row matmul: a bias of one row of N or 1 columns only");
  return Status::ok();
}

Result<std::unique_ptr<Kernel>> make_row_matmul(const MatMulViews& v, const TensorView* bias, float scale,
                                                const std::string& node) {
  if (Status applies = row_matmul_applies(v, bias); !applies.is_ok())
    return unsupported(fmt::format("node '{}': {}", node, applies.message()));
  return std::unique_ptr<Kernel>(new RowMatMul(v, bias, scale));
}

}  // namespace strider::cpu
