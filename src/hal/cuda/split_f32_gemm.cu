// The f32 product on tensor cores (small_gemm.h, prepare_split_f32_gemm): each f32 operand
// is split into two TF32 values, x = big + small, and a x b is summed as
// big_a big_b + big_a small_b + small_a big_b by mma.sync m16n8k8 in f32 ("3xTF32").
//
// Why: a transformer's products at batch 32 in f32 ran in cuBLASLt's true-f32 kernels at
// 47-54% of the H100's FMA ceiling (session 32); TF32 alone has a 10-bit mantissa and is
// not an f32 product, but the split is: big keeps x's top 11 significant bits exactly
// (x with its low 13 mantissa bits cleared), small = x - big is exact in f32 and rounded to
// TF32 (11 more bits), so each operand keeps ~22 bits and the dropped small_a small_b is
// below 2^-22 of the product: the error of f32 rounding, on tensor cores whose TF32
// throughput is ~7x the FMA's.
//
// Non-finite values: an infinity or NaN operand makes its small part NaN, and an overflow
// makes inf; every output the tensor cores leave non-finite is recomputed by f32 FMAs over
// K, so infinities and NaNs come out as f32's (inf x 2 is inf, inf x 0 and inf - inf NaN).
// That costs a K-long loop only where an output is not finite.
//
// Geometry: a block of 256 threads (8 warps as 2 x 4) computes a kTileM x 128 tile of out,
// K in steps of 16 through a 3-stage cp.async pipeline; warp (wm, wn) owns rows wm * kTileM/2
// and columns wn * 32 of the tile, kTileM/32 x 4 fragments of 16 x 8. Each operand is kept
// in shared memory along its own unit stride (A as [m][k] or [k][m], B as [k][n] or [n][k]),
// rows padded so that a fragment's 32 lanes read 32 distinct banks; an operand whose
// fastest dim has unit stride, 16-byte aligned rows and a multiple of 4 elements is copied
// in 16-byte chunks, any other in single elements. Results are summed in a fixed order:
// the same bits every run.
#include "hal/cuda/dependent_launch.cuh"
#include "hal/cuda/gemm_program.cuh"
#include "hal/cuda/mma_tiles.cuh"
#include "hal/cuda/small_gemm.h"

namespace strider::cuda {
namespace {

using namespace device;

constexpr int kThreads = 256, kTileN = 128, kTileK = 16, kStages = 3;
constexpr int kPadK = 4, kPadMN = 8;  // a [.][16] row padded to 20 floats, a [.][128] row to 136

// A shared tile of one operand: kOuter rows of kInner floats, kInner contiguous.
template <int kOuter, int kInner>
struct TileShape {
  static constexpr int kLd = kInner + (kInner == kTileK ? kPadK : kPadMN);
  static constexpr int kFloats = kOuter * kLd;
};

__device__ __forceinline__ void copy_async_16(float* shared, const float* global, bool inside) {
  const unsigned at = unsigned(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(at), "l"(global), "r"(inside ? 16 : 0));
}
__device__ __forceinline__ void copy_async_4(float* shared, const float* global, bool inside) {
  const unsigned at = unsigned(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(at), "l"(global), "r"(inside ? 4 : 0));
}
__device__ __forceinline__ void commit_copies() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void wait_copies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// The element-wise copy of load_tile below, out of line: inlined, its 64-bit addresses
// were hoisted out of the main loop beside the chunked path's and the accumulators', and
// the 128-row tile spilled.
template <int kOuter, int kInner>
__device__ __noinline__ void load_tile_elements(float* tile, const float* base, int64_t outer, int64_t inner, int64_t o0,
                                                int64_t i0, int64_t outer_size, int64_t inner_size) {
  using Shape = TileShape<kOuter, kInner>;
#pragma unroll
  for (int j = 0; j < kOuter * kInner / kThreads; ++j) {
    const int e = int(threadIdx.x) + j * kThreads;
    const int o = e / kInner, i = e % kInner;
    const bool inside = o0 + o < outer_size && i0 + i < inner_size;
    copy_async_4(tile + o * Shape::kLd + i, inside ? base + (o0 + o) * outer + (i0 + i) * inner : base, inside);
  }
}

// tile[o][i] = element (o0 + o, i0 + i) of an operand at base + o * outer + i * inner, zero
// outside (outer_size, inner_size). `chunks`: inner == 1 and 16-byte rows (see above).
template <int kOuter, int kInner>
__device__ __forceinline__ void load_tile(float* tile, const float* base, int64_t outer, int64_t inner, int64_t o0,
                                          int64_t i0, int64_t outer_size, int64_t inner_size, bool chunks) {
  using Shape = TileShape<kOuter, kInner>;
  static_assert(kOuter * kInner % (4 * kThreads) == 0, "whole chunks for every thread");
  if (!chunks) return load_tile_elements<kOuter, kInner>(tile, base, outer, inner, o0, i0, outer_size, inner_size);
#pragma unroll
  for (int j = 0; j < kOuter * kInner / (4 * kThreads); ++j) {
    const int c = int(threadIdx.x) + j * kThreads;
    const int o = c / (kInner / 4), i = (c % (kInner / 4)) * 4;
    const bool inside = o0 + o < outer_size && i0 + i < inner_size;
    copy_async_16(tile + o * Shape::kLd + i, inside ? base + (o0 + o) * outer + (i0 + i) : base, inside);
  }
}

// x = big + small, both TF32 (the tensor cores ignore the low 13 bits of each). Exact for
// finite x; an infinity or NaN makes small NaN, and its outputs are recomputed (below).
__device__ __forceinline__ void split_tf32(float x, uint32_t& big, uint32_t& small) {
  big = __float_as_uint(x) & 0xffffe000u;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(small) : "f"(x - __uint_as_float(big)));
}

__device__ __forceinline__ void mma_1688(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// kAKFastest: A kept as [m][k] (else [k][m]); kBNFastest: B as [k][n] (else [n][k]).
template <int kTileM, bool kAKFastest, bool kBNFastest>
struct Layout {
  using AShape = std::conditional_t<kAKFastest, TileShape<kTileM, kTileK>, TileShape<kTileK, kTileM>>;
  using BShape = std::conditional_t<kBNFastest, TileShape<kTileK, kTileN>, TileShape<kTileN, kTileK>>;
  static constexpr int kStageFloats = AShape::kFloats + BShape::kFloats;
  static constexpr size_t kSharedBytes = size_t(kStages) * kStageFloats * sizeof(float);
  __device__ static float a_at(const float* tile, int m, int k) {
    return kAKFastest ? tile[m * AShape::kLd + k] : tile[k * AShape::kLd + m];
  }
  __device__ static float b_at(const float* tile, int k, int n) {
    return kBNFastest ? tile[k * BShape::kLd + n] : tile[n * BShape::kLd + k];
  }
};

// Row gm of A times column gn of B in f32 FMAs, in K's order: an output the tensor cores
// left non-finite (an operand's infinity or NaN, or an overflow) gets f32's own value.
__device__ __noinline__ float f32_dot(const float* A, const float* B, const SmallGemmArgs& a, int64_t gm, int64_t gn) {
  float sum = 0.0f;
  for (int64_t k = 0; k < a.k; ++k) sum = fmaf(A[gm * a.a_row + k * a.a_col], B[k * a.b_row + gn * a.b_col], sum);
  return sum;
}

template <int kTileM, bool kAKFastest, bool kBNFastest>
__global__ void __launch_bounds__(kThreads) split_f32_gemm_kernel(const SmallGemmArgs a) {
  order_after_producers();
  using L = Layout<kTileM, kAKFastest, kBNFastest>;
  constexpr int kFragmentsM = kTileM / 32;  // a warp's kTileM / 2 rows in fragments of 16
  extern __shared__ float4 shared_storage[];
  float* const shared = reinterpret_cast<float*>(shared_storage);

  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const int wm = warp / 4, wn = warp % 4, g = lane / 4, t = lane % 4;
  const int64_t m0 = int64_t(blockIdx.y) * kTileM, n0 = int64_t(blockIdx.x) * kTileN;
  int64_t batch_index[kSmallGemmBatchDims] = {};
  int64_t a_at = 0, b_at = 0, out_at = 0;
  for (int d = a.batch_dims - 1, rest = int(blockIdx.z); d >= 0; --d) {
    batch_index[d] = rest % a.batch_sizes[d];
    rest /= a.batch_sizes[d];
    a_at += batch_index[d] * a.a_batch[d];
    b_at += batch_index[d] * a.b_batch[d];
    out_at += batch_index[d] * a.out_batch[d];
  }
  const float* const A = static_cast<const float*>(a.a) + a_at;
  const float* const B = static_cast<const float*>(a.b) + b_at;
  const bool a_chunks = a.chunked_a, b_chunks = a.chunked_b;

  const auto fetch = [&](int step, int slot) {
    float* const at = shared + slot * L::kStageFloats;
    const int64_t k0 = int64_t(step) * kTileK;
    if constexpr (kAKFastest)
      load_tile<kTileM, kTileK>(at, A, a.a_row, a.a_col, m0, k0, a.m, a.k, a_chunks);
    else
      load_tile<kTileK, kTileM>(at, A, a.a_col, a.a_row, k0, m0, a.k, a.m, a_chunks);
    float* const bt = at + L::AShape::kFloats;
    if constexpr (kBNFastest)
      load_tile<kTileK, kTileN>(bt, B, a.b_row, a.b_col, k0, n0, a.k, a.n, b_chunks);
    else
      load_tile<kTileN, kTileK>(bt, B, a.b_col, a.b_row, n0, k0, a.n, a.k, b_chunks);
  };

  float acc[kFragmentsM][4][4] = {};
  const int steps = (a.k + kTileK - 1) / kTileK;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < steps) fetch(s, s);
    commit_copies();
  }
  for (int step = 0; step < steps; ++step) {
    wait_copies<kStages - 2>();
    __syncthreads();  // this step's tiles are in; every warp is done with the slot refilled next
    if (step + kStages - 1 < steps) fetch(step + kStages - 1, (step + kStages - 1) % kStages);
    commit_copies();
    const float* const at = shared + (step % kStages) * L::kStageFloats;
    const float* const bt = at + L::AShape::kFloats;
#pragma unroll
    for (int kk = 0; kk < kTileK; kk += 8) {
      // B's four fragments split first, then A's one fragment at a time: 24 registers of
      // split operands live instead of 36 (the 128-row tile ran at ptxas' 255 and spilled).
      uint32_t b_big[4][2], b_small[4][2];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int col = wn * 32 + j * 8 + g;
        split_tf32(L::b_at(bt, kk + t, col), b_big[j][0], b_small[j][0]);
        split_tf32(L::b_at(bt, kk + t + 4, col), b_big[j][1], b_small[j][1]);
      }
#pragma unroll
      for (int i = 0; i < kFragmentsM; ++i) {
        const int row = wm * (kTileM / 2) + i * 16;
        float x[4];
        if constexpr (kAKFastest) {
          // One ldmatrix: 8 x 8 16-bit matrices are 8 rows x 4 floats; lane l points at row
          // l % 8 of matrix l / 8 = (rows +8 for odd, columns +4 for the upper two).
          uint32_t r[4];
          const int q = lane / 8;
          mma::ldmatrix_x4(r, at + (row + (q & 1) * 8 + lane % 8) * L::AShape::kLd + kk + (q >> 1) * 4);
#pragma unroll
          for (int e = 0; e < 4; ++e) x[e] = __uint_as_float(r[e]);
        } else {
          x[0] = L::a_at(at, row + g, kk + t), x[1] = L::a_at(at, row + g + 8, kk + t);
          x[2] = L::a_at(at, row + g, kk + t + 4), x[3] = L::a_at(at, row + g + 8, kk + t + 4);
        }
        uint32_t a_big[4], a_small[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) split_tf32(x[e], a_big[e], a_small[e]);
#pragma unroll
        for (int j = 0; j < 4; ++j) {  // the small terms first, then the large
          mma_1688(acc[i][j], a_small, b_big[j][0], b_big[j][1]);
          mma_1688(acc[i][j], a_big, b_small[j][0], b_small[j][1]);
          mma_1688(acc[i][j], a_big, b_big[j][0], b_big[j][1]);
        }
      }
    }
  }
  wait_copies<0>();
  __syncthreads();  // the stages become the staging of the results

  // The results leave through shared memory, half the tile's rows at a time (the warps of
  // row wm == half write theirs): each thread then finishes whole elements along a row, so
  // the accumulators are not live across the program's and the recompute's calls (with
  // them live there ptxas spilled 1.4 KB a thread), and out is stored along its rows.
  constexpr int kLdOut = kTileN + 4;
  static_assert((kTileM / 2) * kLdOut <= kStages * L::kStageFloats, "a half tile fits the stages");
  float* const out = static_cast<float*>(a.out) + out_at;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    if (wm == half) {
#pragma unroll
      for (int i = 0; i < kFragmentsM; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e)  // fragment element e: row g (+8 for e >= 2), column 2t + e % 2
            shared[(i * 16 + g + (e >= 2 ? 8 : 0)) * kLdOut + wn * 32 + j * 8 + 2 * t + (e % 2)] = acc[i][j][e];
    }
    __syncthreads();
    for (int q = int(threadIdx.x); q < (kTileM / 2) * kTileN; q += kThreads) {
      const int row = q / kTileN, col = q % kTileN;
      const int64_t gm = m0 + half * (kTileM / 2) + row, gn = n0 + col;
      if (gm >= a.m || gn >= a.n) continue;
      float v = shared[row * kLdOut + col];
      if (!isfinite(v)) v = f32_dot(A, B, a, gm, gn);
      v = __fmul_rn(v, a.scale);
      if (a.bias) v = __fadd_rn(v, a.bias[gn]);
      if (a.registers > 0) v = apply_gemm_program<float>(a, v, batch_index, gm, gn);
      out[gm * a.out_row + gn * a.out_col] = v;
    }
    __syncthreads();  // read before the next half overwrites it
  }
}

template <int kTileM, bool kAKFastest, bool kBNFastest>
cudaError_t launch_split_f32_gemm(const SmallGemmArgs& a, cudaStream_t stream) {
  constexpr size_t kShared = Layout<kTileM, kAKFastest, kBNFastest>::kSharedBytes;
  auto* const kernel = split_f32_gemm_kernel<kTileM, kAKFastest, kBNFastest>;
  static const cudaError_t raised = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kShared));
  if (raised != cudaSuccess) return raised;
  const dim3 grid(unsigned((a.n + kTileN - 1) / kTileN), unsigned((a.m + kTileM - 1) / kTileM), unsigned(a.batch_count));
  return launch_dependent(kernel, grid, kThreads, kShared, stream, a);
}

template <int kTileM>
SmallGemmLaunch::Launcher split_launcher(bool a_k_fastest, bool b_n_fastest) {
  if (a_k_fastest)
    return b_n_fastest ? &launch_split_f32_gemm<kTileM, true, true> : &launch_split_f32_gemm<kTileM, true, false>;
  return b_n_fastest ? &launch_split_f32_gemm<kTileM, false, true> : &launch_split_f32_gemm<kTileM, false, false>;
}

// Whether an operand's rows along its unit stride can be copied in 16-byte chunks.
bool chunked(const void* data, int64_t unit, int64_t other, int64_t along) {
  return unit == 1 && other % 4 == 0 && along % 4 == 0 && reinterpret_cast<uintptr_t>(data) % 16 == 0;
}

}  // namespace

Status prepare_split_f32_gemm(SmallGemmLaunch* l) {
  SmallGemmArgs& a = l->args;
  STRIDER_RETURN_IF_ERROR(check_small_gemm_shape(a, "f32 tensor-core product"));
  if (a.split != 1 || a.window.taps != 0 || a.epilogue.activation != ConvActivation::kNone)
    return unsupported("f32 tensor-core product: a split K or a convolution");
  const int64_t tile_m = a.tile_rows;
  if ((int64_t(a.m) + tile_m - 1) / tile_m > 65535) return unsupported("f32 tensor-core product: too many row tiles");
  if (a.batch_count > 65535) return unsupported("f32 tensor-core product: more than 65535 batch indices");
  // A batch offset keeps a chunk's alignment only where every batch stride is a multiple of 4.
  bool a_batches = true, b_batches = true;
  for (int d = 0; d < a.batch_dims; ++d) a_batches &= a.a_batch[d] % 4 == 0, b_batches &= a.b_batch[d] % 4 == 0;
  a.chunked_a = a_batches && (a.a_k_fastest ? chunked(a.a, a.a_col, a.a_row, a.k) : chunked(a.a, a.a_row, a.a_col, a.m));
  a.chunked_b = b_batches && (a.b_n_fastest ? chunked(a.b, a.b_col, a.b_row, a.n) : chunked(a.b, a.b_row, a.b_col, a.k));
  switch (tile_m) {
    case 64: l->launcher = split_launcher<64>(a.a_k_fastest, a.b_n_fastest); break;
    case 128: l->launcher = split_launcher<128>(a.a_k_fastest, a.b_n_fastest); break;
    default: return unsupported("f32 tensor-core product: a tile of 64 or 128 rows");
  }
  return Status::ok();
}

}  // namespace strider::cuda
