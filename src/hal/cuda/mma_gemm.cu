// The pipelined tensor-core product (mma_gemm.h). A block owns 128 rows x 128 columns of Y;
// warp w computes rows 64 (w % 2) .. and columns 32 (w / 2) .. of it as 4 x 4 fragments of
// m16n8k16. K comes 32 at a time: each step's A rows and weight rows are copied into one of
// three shared stages by cp.async (16-byte chunks, zero-filled past the rows and K), two
// steps ahead of the step being multiplied, so a step's loads have two steps' products to
// arrive in. Rows of 32 + 8 elements (80 bytes): an ldmatrix's eight rows land in distinct
// banks. The epilogue goes through shared memory (store_tile says why).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "hal/cuda/copy_async.cuh"
#include "hal/cuda/dependent_launch.cuh"
#include "hal/cuda/mma_gemm.h"
#include "hal/cuda/mma_tiles.cuh"

namespace strider::cuda {
namespace {

using namespace device;
constexpr int kThreads = 256, kRows = kMmaGemmTileRows, kColumns = kMmaGemmTileColumns, kStep = kMmaGemmStepK;
constexpr int kStages = 3, kLd = kStep + 8;
constexpr int kStageElements = (kRows + kColumns) * kLd;  // the A rows, then the weight rows
constexpr int kOutLd = kColumns + 8;  // the f32 output tile's rows (floats)
constexpr int kSharedBytes = std::max(kStages * kStageElements * 2, kRows * kOutLd * 4);
constexpr int kChunks = kStep / 8;  // 16-byte chunks of a staged row
static_assert(kRows * kChunks % kThreads == 0 && kColumns * kChunks % kThreads == 0);

// Step `k0`'s chunks into `stage`: rows past the block's (a_offset < 0) and chunks past K
// are zeros; the weights are padded, so their chunks are all real.
__device__ __forceinline__ void load_stage(const MmaGemmArgs& a, uint16_t* stage, const int64_t* a_offset, int n0, int k0) {
  const uint16_t* x = static_cast<const uint16_t*>(a.a);
  const uint16_t* w = static_cast<const uint16_t*>(a.weights);
#pragma unroll
  for (int i = 0; i < kRows * kChunks / kThreads; ++i) {
    const int at = int(threadIdx.x) + i * kThreads, r = at / kChunks, c = at % kChunks * 8;
    const bool valid = a_offset[r] >= 0 && k0 + c < a.k;
    copy_async_16_or_zero(stage + r * kLd + c, valid ? x + a_offset[r] + k0 + c : x, valid);
  }
  uint16_t* weights = stage + kRows * kLd;
#pragma unroll
  for (int i = 0; i < kColumns * kChunks / kThreads; ++i) {
    const int at = int(threadIdx.x) + i * kThreads, r = at / kChunks, c = at % kChunks * 8;
    copy_async_16(weights + r * kLd + c, w + int64_t(n0 + r) * a.k_pad + k0 + c);
  }
}

// The warp's 64 x 32 outputs over one staged step.
template <typename T>
__device__ __forceinline__ void multiply_stage(const uint16_t* stage, int warp_m, int warp_n, float (&acc)[4][4][4]) {
  const int lane = int(threadIdx.x) % 32, matrix = lane / 8, matrix_row = lane % 8;
  const uint16_t* weights = stage + kRows * kLd;
#pragma unroll
  for (int kk = 0; kk < kStep; kk += 16) {
    uint32_t af[4][4];
#pragma unroll
    for (int mf = 0; mf < 4; ++mf)
      mma::ldmatrix_x4(af[mf], stage + (warp_m * 64 + mf * 16 + matrix % 2 * 8 + matrix_row) * kLd + kk + matrix / 2 * 8);
#pragma unroll
    for (int nf = 0; nf < 4; nf += 2) {
      uint32_t b[4];  // columns 8 nf.. and 8 (nf + 1).., K kk.. and kk + 8..
      mma::ldmatrix_x4(b, weights + (warp_n * 32 + (nf + matrix / 2) * 8 + matrix_row) * kLd + kk + matrix % 2 * 8);
#pragma unroll
      for (int mf = 0; mf < 4; ++mf) {
        mma::mma_16816<T>(acc[mf][nf], af[mf], b[0], b[1]);
        mma::mma_16816<T>(acc[mf][nf + 1], af[mf], b[2], b[3]);
      }
    }
  }
}

// The warp's accumulators into the block's f32 tile of Y (row-major, kOutLd floats a row),
// which reuses the stages' memory: fragment element i of acc[mf][nf] is row 16 mf + g (+ 8
// for i >= 2) of the warp's, column 8 nf + 2 t (+ 1 for odd i). With rows of 136 floats a
// half-warp's 8-byte stores land in 32 distinct banks.
__device__ __forceinline__ void stage_accumulators(float* tile, const float (&acc)[4][4][4], int warp_m, int warp_n) {
  const int lane = int(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int mf = 0; mf < 4; ++mf)
#pragma unroll
    for (int half = 0; half < 2; ++half)
#pragma unroll
      for (int nf = 0; nf < 4; ++nf)
        *reinterpret_cast<float2*>(tile + (warp_m * 64 + mf * 16 + g + 8 * half) * kOutLd + warp_n * 32 + nf * 8 + 2 * t) =
            make_float2(acc[mf][nf][2 * half], acc[mf][nf][2 * half + 1]);
}

// Bias, activation, addends and the one rounding, consecutive threads on consecutive columns
// of a row (coalesced), in a loop that holds one copy of the epilogue's code. Applied to the
// fragments in registers, the 64 elements a thread owns were 64 inlined copies of the
// activation switch, a 458 KB kernel, and it ran the QKV product of BERT b32 bf16 in
// 0.035 ms where cuBLASLt took 0.007; the suspect is instruction fetch: session 43).
template <typename T>
__device__ __forceinline__ void store_tile(const MmaGemmArgs& a, const float* tile, const int64_t* y_offset, int n0) {
  Bits<T>* y = static_cast<Bits<T>*>(a.y);
#pragma unroll 2
  for (int at = int(threadIdx.x); at < kRows * kColumns; at += kThreads) {
    const int r = at / kColumns, c = at % kColumns, column = n0 + c;
    const int64_t row = y_offset[r];
    if (row < 0 || column >= a.n) continue;
    float v = tile[r * kOutLd + c];
    if (a.bias) v += a.bias[column];
    v = apply_conv_epilogue(a.epilogue, v);
    for (int k = 0; k < a.addend_count; ++k) v += to_compute<T>(static_cast<const Bits<T>*>(a.addends[k])[row + column]);
    y[row + column] = to_bits<T>(v);
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) mma_gemm_kernel(const MmaGemmArgs a) {
  device::order_after_producers();
  extern __shared__ __align__(16) uint16_t stages[];
  __shared__ int64_t a_offset[kRows], y_offset[kRows];
  const int thread = int(threadIdx.x), warp = thread / 32, warp_m = warp % 2, warp_n = warp / 2;
  const int64_t row0 = int64_t(blockIdx.x) * kRows;
  const int n0 = int(blockIdx.y) * kColumns;
  if (thread < kRows) {
    const int64_t p = row0 + thread;
    if (p < int64_t(a.batch) * a.rows) {
      const uint32_t b = fast_divide(uint32_t(p), a.div_rows);
      const int64_t r = p - int64_t(b) * a.rows;
      a_offset[thread] = b * a.a_batch + r * a.a_row;
      y_offset[thread] = b * a.y_batch + r * a.y_row;
    } else {
      a_offset[thread] = -1, y_offset[thread] = -1;
    }
  }
  __syncthreads();
  float acc[4][4][4] = {};
  const int steps = (a.k + kStep - 1) / kStep;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < steps) load_stage(a, stages + s * kStageElements, a_offset, n0, s * kStep);
    copy_async_commit();
  }
  for (int step = 0; step < steps; ++step) {
    copy_async_wait<kStages - 2>();  // this step's group has landed (this thread's copies)
    __syncthreads();                 // everyone's, and every warp is done with the stage reloaded next
    const int next = step + kStages - 1;
    if (next < steps) load_stage(a, stages + next % kStages * kStageElements, a_offset, n0, next * kStep);
    copy_async_commit();
    multiply_stage<T>(stages + step % kStages * kStageElements, warp_m, warp_n, acc);
  }
  copy_async_wait<0>();
  __syncthreads();  // every warp is done with the stages: the output tile reuses them
  float* tile = reinterpret_cast<float*>(stages);
  stage_accumulators(tile, acc, warp_m, warp_n);
  __syncthreads();
  store_tile<T>(a, tile, y_offset, n0);
}

template <typename T>
cudaError_t launch_mma_gemm(const MmaGemmArgs& a, cudaStream_t stream) {
  const int64_t rows = int64_t(a.batch) * a.rows;
  const dim3 grid(unsigned((rows + kRows - 1) / kRows), unsigned((a.n + kColumns - 1) / kColumns));
  launch_dependent(mma_gemm_kernel<T>, grid, kThreads, kSharedBytes, stream, a);
  return cudaGetLastError();
}

bool chunked(int64_t elements) { return elements % 8 == 0; }

}  // namespace

Status prepare_mma_gemm(DType dtype, MmaGemmLaunch* l) {
  MmaGemmArgs& a = l->args;
  const int64_t rows = int64_t(a.batch) * a.rows;
  if (a.batch < 1 || a.rows < 1 || a.n < 1 || a.k < 1 || rows >= int64_t(INT32_MAX)) return unsupported("tensor-core product: sizes");
  if (a.k % 8 != 0 || a.k_pad % kStep != 0 || a.k_pad < a.k) return unsupported("tensor-core product: K");
  if (!chunked(a.a_row) || !chunked(a.a_batch) || reinterpret_cast<uintptr_t>(a.a) % 16 != 0)
    return unsupported("tensor-core product: A's rows are not 16-byte chunks");
  if (a.addend_count > kMaxMmaGemmAddends) return unsupported("tensor-core product: addends");
  a.div_rows = make_fast_divisor(a.rows);
  switch (dtype) {
    case DType::kBF16: l->launcher = &launch_mma_gemm<__nv_bfloat16>; break;
    case DType::kF16: l->launcher = &launch_mma_gemm<__half>; break;
    default: return unsupported("tensor-core product on this dtype");
  }
  cudaError_t error = dtype == DType::kBF16
                          ? cudaFuncSetAttribute(mma_gemm_kernel<__nv_bfloat16>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes)
                          : cudaFuncSetAttribute(mma_gemm_kernel<__half>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes);
  if (error != cudaSuccess) return device_error(std::string("tensor-core product: ") + cudaGetErrorString(error));
  return Status::ok();
}

Status run_mma_gemm(const MmaGemmLaunch& l, cudaStream_t stream) {
  if (int64_t(l.args.batch) * l.args.rows == 0 || l.args.n == 0) return Status::ok();
  cudaError_t error = l.launcher(l.args, stream);
  if (error == cudaSuccess) return Status::ok();
  return device_error(std::string("tensor-core product launch failed: ") + cudaGetErrorString(error));
}

}  // namespace strider::cuda
