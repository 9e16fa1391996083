// The small product (small_gemm.h). blockIdx.x: a 32-column tile of out, blockIdx.y: a
// tile of 8 x TM rows, blockIdx.z: the batch index times the split, and the block's rank r
// in its cluster of `split` blocks. Thread t of group g (t = 0..63, g = 0..3) owns rows
// (t / 8) * TM .. + TM and columns (t % 8) * 4 .. + 4 of the tile, and the K slices (of 32)
// 4 (split i + r) + g for i = 0, 1, ...
#include <cooperative_groups.h>

#include "hal/cuda/dependent_launch.cuh"
#include "hal/cuda/fused_forms.cuh"
#include "hal/cuda/small_gemm.h"

namespace strider::cuda {
namespace {

using namespace device;

constexpr int kThreads = 256, kGroups = 4, kGroupThreads = kThreads / kGroups;
constexpr int kSliceK = 32, kTileN = 32, kPad = 4;  // rows padded by 16 bytes: aligned vectors, fewer conflicts

// One instruction of a program the compiled forms do not cover: out of line, so the
// interpreter's switch is compiled once for this file (as in elementwise.cu).
__device__ __noinline__ float gemm_instruction(FusedOp op, float a, float b, float alpha, float beta) {
  return fused_math::apply(op, a, b, alpha, beta);
}

// The program on one output: registers from their views at (batch, row, col), the
// product in its register; a compiled form where the host matched one.
template <typename T>
__device__ float apply_program(const SmallGemmArgs& a, float product, int64_t (&batch_index)[kSmallGemmBatchDims],
                               int64_t row, int64_t col) {
  float r[kMaxFusedInputs + kMaxFusedInstructions];
  for (int i = 0; i < a.registers; ++i) {
    if (i == a.product_register) {
      r[i] = product;
      continue;
    }
    const SmallGemmOperand& o = a.operands[i];
    int64_t at = row * o.row + col * o.col;
    for (int d = 0; d < a.batch_dims; ++d) at += batch_index[d] * o.batch[d];
    r[i] = load<T>(o.data, at);
  }
  const FusedCode& c = a.code;
  using namespace fused_forms;
  const auto x = [&](int i) { return r[c.slot[i]]; };
  const MapParams none;  // the forms take no parameters
  switch (Pattern(c.pattern)) {
    case kSilu: return Silu(none)(x(0));
    case kResidualSilu: return ResidualSilu(none)(x(0), x(1));
    case kGated: return Gated<false>(none)(x(0), x(1));
    case kResidualGated: return Gated<true>(none)(x(0), x(1), x(2));
    case kBiasGeluErf: return BiasGeluErf(none)(x(0), x(1), x(2), x(3), x(4));
    case kBiasGeluTanh: return BiasGeluTanh(none)(r[0], r[1], r[2], r[3], r[4], r[5]);
    case kSiluGate: return SiluGate(none)(x(0), x(1));
    case kMulAdd: return MulAdd(none)(x(0), x(1), x(2), x(3));
    case kMulSub: return MulSub(none)(x(0), x(1), x(2), x(3));
    case kAddThree: return AddThree(none)(x(0), x(1), x(2));
    default: break;
  }
  for (int j = 0; j < c.count; ++j)
    r[a.registers + j] = gemm_instruction(FusedOp(c.op[j]), r[c.a[j]], c.b[j] >= 0 ? r[c.b[j]] : 0.0f, c.alpha[j], c.beta[j]);
  return r[a.registers + c.count - 1];
}

// Element (m, k) of a convolution's implicit im2col (SmallGemmWindow), m and k inside it.
template <typename T>
__device__ __forceinline__ float window_element(const Bits<T>* x, const SmallGemmWindow& w, uint32_t m, uint32_t k) {
  const uint32_t c = fast_divide(k, w.div_taps), tap = k - c * w.div_taps.divisor;
  const uint32_t ky = fast_divide(tap, w.div_kw), kx = tap - ky * w.div_kw.divisor;
  const uint32_t oy = fast_divide(m, w.div_ow), ox = m - oy * w.div_ow.divisor;
  const int iy = int(oy) * w.stride_h - w.pad_h + int(ky) * w.dilation_h;
  const int ix = int(ox) * w.stride_w - w.pad_w + int(kx) * w.dilation_w;
  if (unsigned(iy) >= unsigned(w.h) || unsigned(ix) >= unsigned(w.w)) return 0.0f;
  return to_compute<T>(x[int64_t(c) * w.x_c + int64_t(iy) * w.x_h + int64_t(ix) * w.x_w]);
}

// Where row m of out starts: its pixel (oy, ox) through out's strides for a convolution.
__device__ __forceinline__ int64_t out_row_offset(const SmallGemmArgs& a, int64_t m) {
  if (a.window.taps == 0) return m * a.out_row;
  const uint32_t oy = fast_divide(uint32_t(m), a.window.div_ow), ox = uint32_t(m) - oy * a.window.div_ow.divisor;
  return int64_t(oy) * a.window.y_h + int64_t(ox) * a.window.y_w;
}

template <typename T, int TM>
__global__ void __launch_bounds__(kThreads) small_gemm_kernel(const SmallGemmArgs a) {
  device::order_after_producers();
  constexpr int kTileM = 8 * TM;
  constexpr int kLoadsA = kTileM * kSliceK / kGroupThreads, kLoadsB = kSliceK * kTileN / kGroupThreads;
  struct Slices {
    float a[kGroups][kSliceK][kTileM + kPad];
    float b[kGroups][kSliceK][kTileN + kPad];
  };
  __shared__ union Shared {
    Slices slices;
    float partial[kGroups][kTileM][kTileN + 1];
  } shared;

  const int g = int(threadIdx.x) / kGroupThreads, t = int(threadIdx.x) % kGroupThreads;
  const int tx = t % 8, ty = t / 8;
  const int64_t m0 = int64_t(blockIdx.y) * kTileM, n0 = int64_t(blockIdx.x) * kTileN;
  const int rank = int(blockIdx.z) % a.split;  // the cluster's blocks are consecutive along z
  int64_t batch_index[kSmallGemmBatchDims] = {};
  int64_t a_at = 0, b_at = 0, out_at = 0;
  for (int d = a.batch_dims - 1, rest = int(blockIdx.z) / a.split; d >= 0; --d) {
    batch_index[d] = rest % a.batch_sizes[d];
    rest /= a.batch_sizes[d];
    a_at += batch_index[d] * a.a_batch[d];
    b_at += batch_index[d] * a.b_batch[d];
    out_at += batch_index[d] * a.out_batch[d];
  }
  const Bits<T>* const A = static_cast<const Bits<T>*>(a.a) + a_at;
  const Bits<T>* const B = static_cast<const Bits<T>*>(a.b) + b_at;

  // Element e of a group's slice: (row, k) of A, (k, col) of B, along the unit stride.
  const auto a_coordinates = [&](int e, int& row, int& kk) {
    if (a.a_k_fastest) row = e / kSliceK, kk = e % kSliceK;
    else row = e % kTileM, kk = e / kTileM;
  };
  const auto b_coordinates = [&](int e, int& kk, int& col) {
    if (a.b_n_fastest) kk = e / kTileN, col = e % kTileN;
    else kk = e % kSliceK, col = e / kSliceK;
  };
  float next_a[kLoadsA], next_b[kLoadsB];
  const auto fetch = [&](int step) {
    const int64_t k0 = ((int64_t(step) * a.split + rank) * kGroups + g) * kSliceK;
#pragma unroll
    for (int i = 0; i < kLoadsA; ++i) {
      int row, kk;
      a_coordinates(t + i * kGroupThreads, row, kk);
      const int64_t gm = m0 + row, gk = k0 + kk;
      if (gm >= a.m || gk >= a.k) next_a[i] = 0.0f;
      else if (a.window.taps > 0) next_a[i] = window_element<T>(A, a.window, uint32_t(gm), uint32_t(gk));
      else next_a[i] = to_compute<T>(A[gm * a.a_row + gk * a.a_col]);
    }
#pragma unroll
    for (int i = 0; i < kLoadsB; ++i) {
      int kk, col;
      b_coordinates(t + i * kGroupThreads, kk, col);
      const int64_t gk = k0 + kk, gn = n0 + col;
      next_b[i] = gk < a.k && gn < a.n ? to_compute<T>(B[gk * a.b_row + gn * a.b_col]) : 0.0f;
    }
  };
  const auto stage = [&] {
#pragma unroll
    for (int i = 0; i < kLoadsA; ++i) {
      int row, kk;
      a_coordinates(t + i * kGroupThreads, row, kk);
      shared.slices.a[g][kk][row] = next_a[i];
    }
#pragma unroll
    for (int i = 0; i < kLoadsB; ++i) {
      int kk, col;
      b_coordinates(t + i * kGroupThreads, kk, col);
      shared.slices.b[g][kk][col] = next_b[i];
    }
  };

  float acc[TM][4] = {};
  const int slices = (a.k + kSliceK - 1) / kSliceK;
  const int steps = (slices + kGroups * a.split - 1) / (kGroups * a.split);
  fetch(0);
  for (int step = 0; step < steps; ++step) {
    stage();
    __syncthreads();
    if (step + 1 < steps) fetch(step + 1);  // in flight while this slice is multiplied
#pragma unroll 8
    for (int kk = 0; kk < kSliceK; ++kk) {
      float av[TM];
      if constexpr (TM == 4) {
        const float4 v = *reinterpret_cast<const float4*>(&shared.slices.a[g][kk][ty * 4]);
        av[0] = v.x, av[1] = v.y, av[2] = v.z, av[3] = v.w;
      } else if constexpr (TM == 2) {
        const float2 v = *reinterpret_cast<const float2*>(&shared.slices.a[g][kk][ty * 2]);
        av[0] = v.x, av[1] = v.y;
      } else {
        av[0] = shared.slices.a[g][kk][ty];
      }
      const float4 bv = *reinterpret_cast<const float4*>(&shared.slices.b[g][kk][tx * 4]);
#pragma unroll
      for (int i = 0; i < TM; ++i) {
        acc[i][0] = fmaf(av[i], bv.x, acc[i][0]);
        acc[i][1] = fmaf(av[i], bv.y, acc[i][1]);
        acc[i][2] = fmaf(av[i], bv.z, acc[i][2]);
        acc[i][3] = fmaf(av[i], bv.w, acc[i][3]);
      }
    }
    __syncthreads();  // the slices are restaged (or become the partial sums) next
  }
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) shared.partial[g][ty * TM + i][tx * 4 + j] = acc[i][j];
  __syncthreads();
  // The groups' sums in one fixed order, into partial[0] (each element by one thread).
  for (int e = int(threadIdx.x); e < kTileM * kTileN; e += kThreads) {
    const int row = e / kTileN, col = e % kTileN;
    shared.partial[0][row][col] =
        __fadd_rn(__fadd_rn(__fadd_rn(shared.partial[0][row][col], shared.partial[1][row][col]), shared.partial[2][row][col]),
                  shared.partial[3][row][col]);
  }
  // Split blocks: each block's sum is read by the cluster's others (distributed shared
  // memory), ranks in order, and each block finishes a share of the tile's elements.
  cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
  if (a.split > 1) cluster.sync();
  else __syncthreads();
  const int share = (kTileM * kTileN + a.split - 1) / a.split;
  Bits<T>* const out = static_cast<Bits<T>*>(a.out) + out_at;
  for (int e = rank * share + int(threadIdx.x); e < min((rank + 1) * share, kTileM * kTileN); e += kThreads) {
    const int row = e / kTileN, col = e % kTileN;  // a warp stores one row's 32 columns
    const int64_t gm = m0 + row, gn = n0 + col;
    if (gm >= a.m || gn >= a.n) continue;
    float v = shared.partial[0][row][col];
    if (a.split > 1) {
      v = 0.0f;
      for (int q = 0; q < a.split; ++q) v = __fadd_rn(v, cluster.map_shared_rank(&shared.partial[0][0][0], q)[row * (kTileN + 1) + col]);
    }
    v = __fmul_rn(v, a.scale);
    if (a.bias) v = apply_conv_epilogue(a.epilogue, __fadd_rn(v, a.bias[gn]));
    else v = apply_conv_epilogue(a.epilogue, v);
    if (a.registers > 0) v = apply_program<T>(a, v, batch_index, gm, gn);
    out[out_row_offset(a, gm) + gn * a.out_col] = to_bits<T>(v);
  }
  if (a.split > 1) cluster.sync();  // the others' sums stay readable until every block is done
}

template <typename T, int TM>
cudaError_t launch_small_gemm(const SmallGemmArgs& a, cudaStream_t stream) {
  const dim3 grid(unsigned((a.n + kTileN - 1) / kTileN), unsigned((a.m + 8 * TM - 1) / (8 * TM)),
                  unsigned(a.batch_count * a.split));
  // The split's blocks sum each other's partials through distributed shared memory: one cluster.
  return launch_dependent_in_clusters(small_gemm_kernel<T, TM>, grid, kThreads, 0, dim3(1, 1, unsigned(a.split)), stream,
                                      a);
}

template <typename T>
SmallGemmLaunch::Launcher launcher_for(int rows_per_thread) {
  switch (rows_per_thread) {
    case 1: return &launch_small_gemm<T, 1>;
    case 2: return &launch_small_gemm<T, 2>;
    case 4: return &launch_small_gemm<T, 4>;
    default: return nullptr;
  }
}

}  // namespace

int64_t small_gemm_blocks(const SmallGemmArgs& a) {
  const int64_t tile_m = 8 * int64_t(a.rows_per_thread);
  int64_t count = 1;
  for (int d = 0; d < a.batch_dims; ++d) count *= a.batch_sizes[d];
  return ((a.n + kTileN - 1) / kTileN) * ((a.m + tile_m - 1) / tile_m) * count * a.split;
}

int64_t small_gemm_steps(const SmallGemmArgs& a) {
  const int64_t slices = (int64_t(a.k) + kSliceK - 1) / kSliceK;
  return (slices + kGroups * a.split - 1) / (kGroups * a.split);
}

Status prepare_small_gemm(DType dtype, SmallGemmLaunch* l) {
  SmallGemmArgs& a = l->args;
  if (a.batch_dims < 0 || a.batch_dims > kSmallGemmBatchDims) return unsupported("small GEMM: too many batch dims");
  int64_t count = 1;
  for (int d = 0; d < a.batch_dims; ++d) count *= a.batch_sizes[d];
  if (a.split != 1 && a.split != 2 && a.split != 4 && a.split != 8) return unsupported("small GEMM: a split of 1, 2, 4 or 8");
  if (count < 1 || count * a.split > 65535) return unsupported("small GEMM: batch count times split above 65535");
  a.batch_count = int32_t(count);
  if (a.m < 1 || a.n < 1 || a.k < 1) return unsupported("small GEMM: an empty product");
  if ((int64_t(a.m) + 8 * a.rows_per_thread) / (8 * a.rows_per_thread) > 65535)
    return unsupported("small GEMM: too many row tiles");
  if (a.registers < 0 || a.registers > kMaxFusedInputs || a.product_register >= std::max(a.registers, 1) ||
      a.code.count > kMaxFusedInstructions || (a.registers > 0 && a.code.count < 1))
    return unsupported("small GEMM: a program outside its limits");
  a.code.pattern = a.registers > 0 ? uint8_t(fused_forms::match_pattern(a.code, a.registers)) : 0;
  switch (dtype) {
    case DType::kF32: l->launcher = launcher_for<float>(a.rows_per_thread); break;
    case DType::kBF16: l->launcher = launcher_for<__nv_bfloat16>(a.rows_per_thread); break;
    case DType::kF16: l->launcher = launcher_for<__half>(a.rows_per_thread); break;
    default: return unsupported("small GEMM on this dtype");
  }
  if (!l->launcher) return unsupported("small GEMM: rows per thread must be 1, 2 or 4");
  return Status::ok();
}

Status run_small_gemm(const SmallGemmLaunch& l, cudaStream_t stream) {
  cudaError_t error = l.launcher(l.args, stream);
  if (error == cudaSuccess) return Status::ok();
  return device_error(std::string("small GEMM launch failed: ") + cudaGetErrorString(error));
}

}  // namespace strider::cuda
