// Probe: cuBLASLt's f32 products on this GPU with each compute type: true f32 (32F), the
// BF16x9 emulation (EMULATED_16BFX9, eager and performant strategies) and TF32, every
// heuristic algorithm timed (best of them, 20 runs), and the largest error against the
// double product relative to sum |a b| over 2000 sampled outputs. Session 33 (H100): BF16x9
// runs the plain f32 kernels on Hopper (bench/RESULTS.md).
//   nvcc -O2 -arch=sm_90 -o probe probe.cu -lcublasLt && ./probe
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <random>
#include <cmath>
#define CK(x) do { auto e_ = (x); if (e_ != 0) { printf("%s:%d err %d\n", __FILE__, __LINE__, (int)e_); return -1; } } while (0)

static int run(cublasLtHandle_t lt, int m, int n, int k, cublasComputeType_t ct, int strategy,
               const float* a, const float* b, float* c, void* ws, size_t wsz, double* ms) {
  cublasLtMatmulDesc_t op; CK(cublasLtMatmulDescCreate(&op, ct, CUDA_R_32F));
  cublasLtEmulationDesc_t em = nullptr;
  if (strategy >= 0) {
    CK(cublasLtEmulationDescCreate(&em));
    cublasEmulationStrategy_t s = (cublasEmulationStrategy_t)strategy;
    CK(cublasLtEmulationDescSetAttribute(em, CUBLASLT_EMULATION_DESC_STRATEGY, &s, sizeof s));
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EMULATION_DESCRIPTOR, &em, sizeof em));
  }
  // row-major C[m,n] = A[m,k] B[k,n]  ==  column-major C^T[n,m] = B^T[n,k] A^T[k,m]
  cublasLtMatrixLayout_t la, lb, lc;
  CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, n, k, n));
  CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, k, m, k));
  CK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, n, m, n));
  cublasLtMatmulPreference_t pref; CK(cublasLtMatmulPreferenceCreate(&pref));
  CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsz, sizeof wsz));
  cublasLtMatmulHeuristicResult_t h[8]; int found = 0;
  auto st = cublasLtMatmulAlgoGetHeuristic(lt, op, lb, la, lc, lc, pref, 8, h, &found);
  if (st != 0 || found == 0) { printf("  no algorithm (status %d)\n", (int)st); return 1; }
  float alpha = 1, beta = 0;
  double best = 1e9;
  for (int i = 0; i < found; ++i) {
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    for (int w = 0; w < 3; ++w) cublasLtMatmul(lt, op, &alpha, b, lb, a, la, &beta, c, lc, c, lc, &h[i].algo, ws, wsz, 0);
    cudaEventRecord(e0);
    for (int r = 0; r < 20; ++r) cublasLtMatmul(lt, op, &alpha, b, lb, a, la, &beta, c, lc, c, lc, &h[i].algo, ws, wsz, 0);
    cudaEventRecord(e1); cudaEventSynchronize(e1);
    float t; cudaEventElapsedTime(&t, e0, e1); if (t / 20 < best) best = t / 20;
  }
  *ms = best;
  if (cudaDeviceSynchronize() != cudaSuccess) { printf("  cuda error\n"); return -1; }
  return 0;
}

int main() {
  cublasLtHandle_t lt; CK(cublasLtCreate(&lt));
  int shapes[][3] = {{4096, 768, 768}, {4096, 3072, 768}, {4096, 768, 3072}, {4096, 2304, 768}, {128, 768, 768}};
  size_t wsz = 64 << 20; void* ws; cudaMalloc(&ws, wsz);
  std::mt19937 rng(7); std::uniform_real_distribution<float> u(-1, 1);
  printf("%-18s %-10s %10s %10s %12s\n", "shape", "compute", "ms", "TFLOP/s", "max rel err");
  for (auto& s : shapes) {
    int m = s[0], n = s[1], k = s[2];
    std::vector<float> ha((size_t)m * k), hb((size_t)k * n), hc((size_t)m * n);
    for (auto& x : ha) x = u(rng); for (auto& x : hb) x = u(rng);
    float *a, *b, *c; cudaMalloc(&a, ha.size() * 4); cudaMalloc(&b, hb.size() * 4); cudaMalloc(&c, hc.size() * 4);
    cudaMemcpy(a, ha.data(), ha.size() * 4, cudaMemcpyHostToDevice); cudaMemcpy(b, hb.data(), hb.size() * 4, cudaMemcpyHostToDevice);
    struct { const char* name; cublasComputeType_t ct; int strat; } cts[] = {
      {"32F", CUBLAS_COMPUTE_32F, -1}, {"BF16x9", CUBLAS_COMPUTE_32F_EMULATED_16BFX9, 2},
      {"BF16x9p", CUBLAS_COMPUTE_32F_EMULATED_16BFX9, 1}, {"TF32", CUBLAS_COMPUTE_32F_FAST_TF32, -1}};
    for (auto& ct : cts) {
      double ms = 0; cudaMemset(c, 0, hc.size() * 4);
      int r = run(lt, m, n, k, ct.ct, ct.strat, a, b, c, ws, wsz, &ms);
      if (r != 0) { printf("%5dx%4dx%4d  %-10s failed\n", m, n, k, ct.name); continue; }
      cudaMemcpy(hc.data(), c, hc.size() * 4, cudaMemcpyDeviceToHost);
      double worst = 0;
      for (int t = 0; t < 2000; ++t) {
        int i = rng() % m, j = rng() % n; double ref = 0, mag = 0;
        for (int q = 0; q < k; ++q) { ref += (double)ha[(size_t)i * k + q] * hb[(size_t)q * n + j]; mag += std::fabs((double)ha[(size_t)i * k + q] * hb[(size_t)q * n + j]); }
        worst = std::max(worst, std::fabs(hc[(size_t)i * n + j] - ref) / mag);
      }
      printf("%5dx%4dx%4d  %-10s %10.4f %10.1f %12.2e\n", m, n, k, ct.name, ms, 2.0 * m * n * k / ms / 1e9, worst);
    }
    cudaFree(a); cudaFree(b); cudaFree(c);
  }
  return 0;
}
