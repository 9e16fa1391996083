// Probe: can an f32 product run as three TF32 products in cuBLASLt, as accurate as f32 and
// faster? Each operand x is split into big (x with its low 13 mantissa bits cleared: exact
// TF32) and small = x - big rounded to TF32; then C = A_small B_big, C += A_big B_small,
// C += A_big B_big, three cuBLASLt FAST_TF32 products (beta 1 adds the earlier ones in
// f32). Session 33 wrote the same scheme as one mma.sync kernel (5dde4ba): 2.5-4x slower
// than cuBLASLt's true f32 and over f32's tolerance at K = 1100 (the kernel suite's
// broadcast layout); cuBLASLt's TF32 kernels run at 190-300 TFLOP/s on an H100, 4-7x its
// f32 ones, so three of them could still win. Printed per shape and operand kind:
//   ms: the three products (B is a constant weight, split once, untimed), and with A's
//       split on the device added; for 32F and plain TF32 their one product;
//   err/sum|ab|: the largest |c - exact| / sum_k |a b| (exact in double);
//   tol: the largest |c - exact| / (1e-6 + 1e-5 max|exact|): the kernel suite's f32
//       tolerance, above 1 fails it.
//   nvcc -O2 -arch=sm_90 -o probe probe.cu -lcublasLt && ./probe
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#define CHECK(x)                                                                  \
  do {                                                                            \
    const int e_ = int(x);                                                        \
    if (e_ != 0) {                                                                \
      std::printf("%s:%d: %s failed with %d\n", __FILE__, __LINE__, #x, e_);      \
      std::exit(1);                                                               \
    }                                                                             \
  } while (0)

namespace {

__global__ void split_kernel(const float* x, float* big, float* small, size_t n) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float v = x[i];
  const float b = __uint_as_float(__float_as_uint(v) & 0xffffe000u);
  uint32_t s;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(s) : "f"(v - b));
  big[i] = b;
  small[i] = __uint_as_float(s);
}

void split_on_device(const float* x, float* big, float* small, size_t n) {
  split_kernel<<<unsigned((n + 255) / 256), 256>>>(x, big, small, n);
}

struct Lt {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = size_t(64) << 20;
  Lt() {
    CHECK(cublasLtCreate(&handle));
    CHECK(cudaMalloc(&workspace, workspace_bytes));
  }
};

// Row-major C[m, n] = A[m, k] B[k, n] (+ beta C): column-major C^T = B^T A^T.
struct Product {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulAlgo_t algo{};
  Product(Lt& lt, cublasComputeType_t compute, int m, int n, int k) {
    CHECK(cublasLtMatmulDescCreate(&op, compute, CUDA_R_32F));
    CHECK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, n, k, n));
    CHECK(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, k, m, k));
    CHECK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, n, m, n));
    cublasLtMatmulPreference_t pref;
    CHECK(cublasLtMatmulPreferenceCreate(&pref));
    CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &lt.workspace_bytes,
                                               sizeof lt.workspace_bytes));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    CHECK(cublasLtMatmulAlgoGetHeuristic(lt.handle, op, lb, la, lc, lc, pref, 1, &result, &found));
    if (found == 0) std::exit((std::printf("no algorithm\n"), 1));
    algo = result.algo;
  }
  void run(Lt& lt, const float* a, const float* b, float* c, float beta) const {
    const float alpha = 1.0f;
    CHECK(cublasLtMatmul(lt.handle, op, &alpha, b, lb, a, la, &beta, c, lc, c, lc, &algo, lt.workspace,
                         lt.workspace_bytes, nullptr));
  }
};

template <typename F>
double time_ms(F&& f) {
  for (int i = 0; i < 3; ++i) f();
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaEventRecord(start);
  constexpr int kRuns = 20;
  for (int i = 0; i < kRuns; ++i) f();
  cudaEventRecord(stop);
  CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  return ms / kRuns;
}

struct Errors {
  double per_sum = 0, per_tolerance = 0;
};

Errors errors_of(const std::vector<float>& a, const std::vector<float>& b, const std::vector<float>& c, int m, int n,
                 int k) {
  std::mt19937 rng(11);
  const size_t samples = std::min<size_t>(size_t(m) * n, 3000);
  std::vector<double> exact(samples), error(samples), magnitude(samples);
  double largest = 0;
  for (size_t s = 0; s < samples; ++s) {
    const size_t at = samples == size_t(m) * n ? s : rng() % (size_t(m) * n);
    const size_t i = at / n, j = at % n;
    double sum = 0, mag = 0;
    for (int q = 0; q < k; ++q) {
      const double p = double(a[i * k + q]) * double(b[size_t(q) * n + j]);
      sum += p;
      mag += std::fabs(p);
    }
    exact[s] = sum, magnitude[s] = mag, error[s] = std::fabs(double(c[at]) - sum);
    largest = std::max(largest, std::fabs(sum));
  }
  Errors e;
  for (size_t s = 0; s < samples; ++s) {
    if (magnitude[s] > 0) e.per_sum = std::max(e.per_sum, error[s] / magnitude[s]);
    e.per_tolerance = std::max(e.per_tolerance, error[s] / (1e-6 + 1e-5 * largest));
  }
  return e;
}

struct Case {
  int m, n, k;
  const char* kind;  // "normal": N(0, 1); "row-constant": A's rows constant along K (a broadcast view)
};

void run_case(Lt& lt, const Case& c) {
  const int m = c.m, n = c.n, k = c.k;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> ha(size_t(m) * k), hb(size_t(k) * n), hc(size_t(m) * n);
  for (int i = 0; i < m; ++i) {
    const float row = normal(rng);
    for (int q = 0; q < k; ++q) ha[size_t(i) * k + q] = std::strcmp(c.kind, "row-constant") == 0 ? row : normal(rng);
  }
  for (float& x : hb) x = normal(rng);
  float *a, *b, *out, *a_big, *a_small, *b_big, *b_small;
  CHECK(cudaMalloc(&a, ha.size() * 4));
  CHECK(cudaMalloc(&b, hb.size() * 4));
  CHECK(cudaMalloc(&out, hc.size() * 4));
  CHECK(cudaMalloc(&a_big, ha.size() * 4));
  CHECK(cudaMalloc(&a_small, ha.size() * 4));
  CHECK(cudaMalloc(&b_big, hb.size() * 4));
  CHECK(cudaMalloc(&b_small, hb.size() * 4));
  CHECK(cudaMemcpy(a, ha.data(), ha.size() * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(b, hb.data(), hb.size() * 4, cudaMemcpyHostToDevice));
  split_on_device(b, b_big, b_small, hb.size());
  split_on_device(a, a_big, a_small, ha.size());
  const Product f32(lt, CUBLAS_COMPUTE_32F, m, n, k), tf32(lt, CUBLAS_COMPUTE_32F_FAST_TF32, m, n, k);
  const auto three = [&] {
    tf32.run(lt, a_small, b_big, out, 0.0f);
    tf32.run(lt, a_big, b_small, out, 1.0f);
    tf32.run(lt, a_big, b_big, out, 1.0f);
  };
  const auto report = [&](const char* method, double ms, double ms_with_split) {
    CHECK(cudaMemcpy(hc.data(), out, hc.size() * 4, cudaMemcpyDeviceToHost));
    const Errors e = errors_of(ha, hb, hc, m, n, k);
    char split[32] = "";
    if (ms_with_split > 0) std::snprintf(split, sizeof split, "%.4f", ms_with_split);
    std::printf("%5d x %4d x %4d %-12s %-7s %9.4f %9s %8.1f %12.2e %8.2f\n", m, n, k, c.kind, method, ms, split,
                2.0 * m * n * k / ms / 1e9, e.per_sum, e.per_tolerance);
  };
  report("32F", time_ms([&] { f32.run(lt, a, b, out, 0.0f); }), 0);
  report("TF32", time_ms([&] { tf32.run(lt, a, b, out, 0.0f); }), 0);
  const double gemms = time_ms(three);
  const double with_split = time_ms([&] {
    split_on_device(a, a_big, a_small, ha.size());
    three();
  });
  report("3xTF32", gemms, with_split);
  for (float* p : {a, b, out, a_big, a_small, b_big, b_small}) cudaFree(p);
}

}  // namespace

int main() {
  Lt lt;
  std::printf("%-18s %-12s %-7s %9s %9s %8s %12s %8s\n", "M x N x K", "operands", "method", "ms", "+split A", "TFLOP/s",
              "err/sum|ab|", "tol");
  const Case cases[] = {
      {4096, 768, 768, "normal"},  {4096, 3072, 768, "normal"}, {4096, 768, 3072, "normal"},
      {4096, 256, 1024, "normal"}, {4096, 1024, 256, "normal"}, {64, 64, 1100, "normal"},
      {64, 64, 1100, "row-constant"}, {4096, 768, 3072, "row-constant"},
  };
  for (const Case& c : cases) run_case(lt, c);
  CHECK(cudaDeviceSynchronize());
  return 0;
}
