// The f32 tensor-core product (hal/cuda/split_f32_gemm.cu), forced over the timed choice,
// on what its split of each operand into two TF32 values could get wrong and the kernel
// suite's random values do not reach: infinities and NaNs (f32's own: inf x 2 is inf,
// inf x 0 and inf - inf are NaN), values near f32's largest (a rounded large part would
// overflow) and tiny ones; and its accuracy
// against the float64 product, which must be f32's (a plain TF32 product misses it by
// ~1000x). Its values on every layout are the kernel suite's (SmallProducts).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "passes/infer_shapes.h"

namespace strider::cuda_test {
namespace {

constexpr int kM = 40, kK = 36, kN = 20;

// a [kM, kK] x b [kK, kN] on the GPU by `choice` (a kernel name prefix).
std::vector<float> product_on_gpu(const std::vector<float>& a, const std::vector<float>& b, const char* choice) {
  setenv("STRIDER_CUDA_KERNEL_CHOICE", choice, 1);
  setenv("STRIDER_CUDA_F32_TENSOR_GEMM", "1", 1);  // offered by default or not
  GraphBuilder builder(17);
  builder.output(builder.op("MatMul", {builder.input("a", DType::kF32, {kM, kK}), builder.input("b", DType::kF32, {kK, kN})}));
  Graph graph = builder.build();
  EXPECT_TRUE(infer_and_fold(graph).is_ok());
  auto outputs = run_dense(graph, {{"a", f32({kM, kK}, a)}, {"b", f32({kK, kN}, b)}});
  unsetenv("STRIDER_CUDA_KERNEL_CHOICE");
  unsetenv("STRIDER_CUDA_F32_TENSOR_GEMM");
  EXPECT_TRUE(outputs.is_ok()) << outputs.status().to_string();
  if (!outputs.is_ok()) return {};
  const float* data = (*outputs)[0].data<float>();
  return std::vector<float>(data, data + kM * kN);
}

std::vector<float> seeded(int count, uint32_t seed, float scale) {
  Tensor t = random_tensor(DType::kF32, {count}, seed);
  std::vector<float> v(t.data<float>(), t.data<float>() + count);
  for (float& x : v) x *= scale;
  return v;
}

double product_at(const std::vector<float>& a, const std::vector<float>& b, int i, int j, double* magnitude) {
  double sum = 0;
  *magnitude = 0;
  for (int k = 0; k < kK; ++k) {
    sum += double(a[i * kK + k]) * double(b[k * kN + j]);
    *magnitude += std::fabs(double(a[i * kK + k]) * double(b[k * kN + j]));
  }
  return sum;
}

constexpr const char* kTensorProduct = "strider-cuda:f32-tensor-gemm";

TEST(CudaF32TensorGemm, InfinitiesAndNansAsInF32) {
  STRIDER_REQUIRE_GPU();
  std::vector<float> a = seeded(kM * kK, 1, 1.0f), b = seeded(kK * kN, 2, 1.0f);
  const float inf = std::numeric_limits<float>::infinity();
  b[5 * kN + 4] = 0.0f;                         // column 4 has a zero in row 5
  a[0 * kK + 5] = inf;                          // row 0: inf x b (NaN in column 4: inf x 0)
  a[1 * kK + 5] = -inf;                         // row 1: -inf x b
  a[2 * kK + 5] = inf, a[2 * kK + 6] = -inf;    // row 2: NaN where b's rows 5 and 6 agree in sign
  a[3 * kK + 7] = std::numeric_limits<float>::quiet_NaN();  // row 3: NaN everywhere
  uint32_t low_payload = 0x7f800001u;  // row 4: a NaN whose payload is only in bits TF32 drops
  std::memcpy(&a[4 * kK + 7], &low_payload, 4);
  const std::vector<float> got = product_on_gpu(a, b, kTensorProduct);
  ASSERT_EQ(got.size(), size_t(kM * kN));
  // As f32 gives it: IEEE arithmetic on the products in double has the same infinities and NaNs.
  int nans = 0, infinities = 0;
  for (int i = 0; i < kM; ++i)
    for (int j = 0; j < kN; ++j) {
      double magnitude = 0;
      const double exact = product_at(a, b, i, j, &magnitude);
      const float v = got[i * kN + j];
      if (std::isnan(exact)) {
        ++nans;
        EXPECT_TRUE(std::isnan(v)) << "row " << i << ", column " << j << ": " << v << ", not NaN";
      } else if (std::isinf(exact)) {
        ++infinities;
        EXPECT_EQ(v, float(exact)) << "row " << i << ", column " << j;
      } else {
        EXPECT_TRUE(std::isfinite(v)) << "row " << i << ", column " << j << ": " << v;
      }
    }
  EXPECT_GT(nans, 2 * kN);  // rows 3 and 4, and row 0 column 4 (row 2's depend on the seed)
  EXPECT_GT(infinities, kN);
}

// Relative to the sum of |products| (the scale of f32's own rounding error over K terms);
// a non-finite result fails at once, with where it is.
double worst_error(const std::vector<float>& a, const std::vector<float>& b, const std::vector<float>& got) {
  double worst = 0;
  for (int i = 0; i < kM; ++i)
    for (int j = 0; j < kN; ++j) {
      double magnitude = 0;
      const double exact = product_at(a, b, i, j, &magnitude);
      const float v = got[i * kN + j];
      if (!std::isfinite(v)) {
        ADD_FAILURE() << "row " << i << ", column " << j << ": " << v << " against " << exact;
        continue;
      }
      if (magnitude > 0) worst = std::max(worst, std::fabs(double(v) - exact) / magnitude);
    }
  return worst;
}

TEST(CudaF32TensorGemm, AccurateAsF32AtEveryScale) {
  STRIDER_REQUIRE_GPU();
  // Operands large (one near f32's largest, its products still finite), ordinary, and
  // tiny (1e-30: their small parts, 2^-11 below, still normal numbers).
  for (float scale : {1.0e19f, 1.0f, 1.0e-30f}) {
    SCOPED_TRACE(scale);
    std::vector<float> a = seeded(kM * kK, 3, scale), b = seeded(kK * kN, 4, 1.0f / scale);
    if (scale > 1.0f) a[7] = 3.4e38f;
    const std::vector<float> got = product_on_gpu(a, b, kTensorProduct);
    ASSERT_EQ(got.size(), size_t(kM * kN));
    // f32's rounding over 36 terms is below ~36 x 2^-24 = 2e-6; TF32 alone would be ~1e-3.
    EXPECT_LT(worst_error(a, b, got), 2e-6);
  }
  std::vector<float> a = seeded(kM * kK, 5, 1.0f), b = seeded(kK * kN, 6, 1.0f);
  b[0] = 3.4e38f;  // a large part rounded up from 3.4e38 would be inf
  for (int i = 0; i < kM; ++i) a[i * kK] = std::clamp(a[i * kK], -2.0f, 2.0f) * 0.45f;  // products below f32's largest
  const std::vector<float> got = product_on_gpu(a, b, kTensorProduct);
  ASSERT_EQ(got.size(), size_t(kM * kN));
  EXPECT_TRUE(std::isfinite(got[0])) << got[0];
  EXPECT_LT(worst_error(a, b, got), 2e-6);
}

}  // namespace
}  // namespace strider::cuda_test
