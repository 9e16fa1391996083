// FusedGatedStack's kernel (gated_stack.h): a block's tile of columns through every unit
// in shared memory.
#include <string>

#include "hal/cuda/column_kernels.cuh"
#include "hal/cuda/copy_async.cuh"
#include "hal/cuda/dependent_launch.cuh"
#include "hal/cuda/gated_stack.h"
#include "hal/cuda/launch.h"
#include "ops/gated_stack_math.h"

namespace strider::cuda {
namespace {

using namespace device;

// Column `col`'s element offsets in x and y (image, then spatial position row-major).
__device__ __forceinline__ void column_offsets(const GatedStackArgs& a, int64_t col, int64_t* xo, int64_t* yo) {
  int64_t pixels = a.spatial[0] * a.spatial[1] * a.spatial[2];
  int64_t n = col / pixels, p = col - n * pixels;
  int64_t x = n * a.x_image, y = n * a.y_image;
  for (int d = a.spatial_rank - 1; d >= 0; --d) {
    const int64_t i = p % a.spatial[d];
    p /= a.spatial[d];
    x += i * a.x_spatial[d], y += i * a.y_spatial[d];
  }
  *xo = x, *yo = y;
}

// Unit u's weights and bias (unit_floats, a multiple of 4: 2C(C+1) with C(C+1) even) into
// `buffer` by the whole block, one group of copies a thread.
__device__ __forceinline__ void fetch_unit(const GatedStackArgs& a, int u, float* buffer) {
  const int64_t unit_floats = gated_stack_unit_floats(a.c);
  const float4* source = reinterpret_cast<const float4*>(a.weights + u * unit_floats);
  float4* destination = reinterpret_cast<float4*>(buffer);
  for (int64_t i = threadIdx.x; i < unit_floats / 4; i += blockDim.x) copy_async_16(destination + i, source + i);
  copy_async_commit();
}

// The block's `valid` columns of x into h [C][ld] as f32, zeros in the columns after them
// up to `columns`. A warp's elements run along channels where x's channels are neighbours
// (channels-last), else along columns: neighbouring elements in memory either way. (An
// offset may be negative: a view with negative strides addresses below its first element.)
template <typename T>
__device__ __forceinline__ void load_tile(const GatedStackArgs& a, const int64_t* x_off, int valid, int columns, int ld,
                                          float* h) {
  const int c = a.c;
  const bool channels_inner = a.x_channel == 1;
  for (int e = int(threadIdx.x); e < c * columns; e += blockDim.x) {
    const int k = channels_inner ? e % c : e / columns, p = channels_inner ? e / c : e % columns;
    h[k * ld + p] = p < valid ? load<T>(a.x, x_off[p] + k * a.x_channel) : 0.0f;
  }
}

// h [C][ld]'s first `valid` columns into the block's columns of y, in y's order as
// load_tile reads x.
template <typename T>
__device__ __forceinline__ void store_tile(const GatedStackArgs& a, const int64_t* y_off, int valid, int ld,
                                           const float* h) {
  const int c = a.c;
  const bool channels_inner = a.y_channel == 1;
  for (int e = int(threadIdx.x); e < c * valid; e += blockDim.x) {
    const int k = channels_inner ? e % c : e / valid, p = channels_inner ? e / c : e % valid;
    store<T>(a.y, y_off[p] + k * a.y_channel, h[k * ld + p]);
  }
}

// Thread (k, g)'s gate rows a_k, b_k for its Q columns: unit weights w (W^T [C][2C], then
// B) times h's columns [g Q, g Q + Q), plus the bias.
template <int Q>
__device__ __forceinline__ void gate_rows(const float* w, const float* h, int c, int ld, int k, int g, float* acc_a,
                                          float* acc_b) {
#pragma unroll
  for (int q = 0; q < Q; ++q) acc_a[q] = w[2 * c * c + k], acc_b[q] = w[2 * c * c + c + k];
#pragma unroll 4
  for (int j = 0; j < c; ++j) {
    const float wa = w[j * 2 * c + k], wb = w[j * 2 * c + c + k];
    const float* hj = h + j * ld + g * Q;
    float hv[Q];
    if constexpr (Q % 4 == 0) {
#pragma unroll
      for (int q = 0; q < Q; q += 4) {  // hj + q is 16-byte aligned: ld and g Q are multiples of 4
        const float4 v = *reinterpret_cast<const float4*>(hj + q);
        hv[q] = v.x, hv[q + 1] = v.y, hv[q + 2] = v.z, hv[q + 3] = v.w;
      }
    } else {
#pragma unroll
      for (int q = 0; q < Q; ++q) hv[q] = hj[q];
    }
#pragma unroll
    for (int q = 0; q < Q; ++q) acc_a[q] = fmaf(wa, hv[q], acc_a[q]), acc_b[q] = fmaf(wb, hv[q], acc_b[q]);
  }
}

// Thread (k, g): channel k of column group g, Q columns [g Q, g Q + Q) of the block's P.
// Shared memory (gated_stack_shared_bytes): x's and y's offsets of the P columns, the
// weight buffers (two: unit u + 1's copy runs during unit u; one where two do not fit),
// then h [C][ld] as f32.
template <typename T, int Q>
__global__ void __launch_bounds__(kThreads) gated_stack_kernel(const GatedStackArgs a) {
  device::order_after_producers();
  extern __shared__ __align__(16) unsigned char shared[];
  const int c = a.c, columns = a.groups * Q, ld = gated_stack_row_stride(columns, Q);
  const int64_t unit_floats = gated_stack_unit_floats(c);
  int64_t* x_off = reinterpret_cast<int64_t*>(shared);
  int64_t* y_off = x_off + columns;
  float* const buffer0 = reinterpret_cast<float*>(y_off + columns);  // 16-byte aligned: 16 x columns bytes in
  float* const buffer1 = buffer0 + (a.weight_buffers - 1) * unit_floats;  // buffer0 itself with one buffer
  float* h = buffer0 + a.weight_buffers * unit_floats;
  fetch_unit(a, 0, buffer0);
  const int64_t first = int64_t(blockIdx.x) * columns;
  const int valid = int(min(int64_t(columns), a.columns - first));
  for (int p = int(threadIdx.x); p < valid; p += blockDim.x) column_offsets(a, first + p, x_off + p, y_off + p);
  __syncthreads();
  load_tile<T>(a, x_off, valid, columns, ld, h);
  const int k = int(threadIdx.x) % c, g = int(threadIdx.x) / c;
  const bool active = g < a.groups;
  for (int u = 0; u < a.units; ++u) {
    const float* w = (u & 1) ? buffer1 : buffer0;
    if (a.weight_buffers == 2 && u + 1 < a.units) {
      fetch_unit(a, u + 1, (u & 1) ? buffer0 : buffer1);  // read by every thread before the last barrier
      copy_async_wait<1>();
    } else {
      copy_async_wait<0>();
    }
    __syncthreads();  // unit u's weights and the previous unit's h are in place
    float acc_a[Q], acc_b[Q];
    if (active) gate_rows<Q>(w, h, c, ld, k, g, acc_a, acc_b);
    __syncthreads();  // every thread has read h and unit u's weights
    if (a.weight_buffers == 1 && u + 1 < a.units) fetch_unit(a, u + 1, buffer0);
    if (active) {
#pragma unroll
      for (int q = 0; q < Q; ++q) {
        float* hq = h + k * ld + g * Q + q;
        *hq = gated_residual(*hq, acc_a[q], acc_b[q]);
      }
    }
  }
  __syncthreads();
  store_tile<T>(a, y_off, valid, ld, h);
}

// The kernel for storage T and Q columns a thread, as column_kernels.cuh picks them.
template <typename T, int Q>
struct GatedStackEntry {
  static cudaError_t launch(const GatedStackArgs& a, cudaStream_t stream) {
    const int columns = a.groups * Q;
    const int64_t blocks = (a.columns + columns - 1) / columns;
    return launch_dependent(gated_stack_kernel<T, Q>, dim3(unsigned(blocks)), dim3(kThreads),
                            gated_stack_shared_bytes(a), stream, a);
  }
  static cudaError_t allow(size_t bytes) {
    return cudaFuncSetAttribute(gated_stack_kernel<T, Q>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
  }
};

}  // namespace

Status prepare_gated_stack(DType dtype, int sms, size_t shared_limit, GatedStackLaunch* launch) {
  GatedStackArgs& a = launch->args;
  if (a.c < 1 || a.c > kGatedStackMaxChannels || a.spatial_rank < 1 || a.spatial_rank > 3)
    return unsupported("gated stack: " + std::to_string(a.c) + " channels, " + std::to_string(a.spatial_rank) +
                       " spatial axes (the kernel takes 1-128 and 1-3)");
  a.groups = kThreads / a.c;
  a.q = columns_per_thread(a.columns, a.groups, sms, [](int) { return true; });
  const int64_t blocks = (a.columns + int64_t(a.groups) * a.q - 1) / (int64_t(a.groups) * a.q);
  if (blocks > INT32_MAX) return unsupported("gated stack: too many pixels for one launch");
  launch->blocks = int32_t(blocks);
  // Two weight buffers where they fit (the next unit's copy overlaps this unit's work), else one.
  a.weight_buffers = 2;
  if (gated_stack_shared_bytes(a) > shared_limit) a.weight_buffers = 1;
  const size_t shared = gated_stack_shared_bytes(a);
  if (shared > shared_limit)
    return unsupported("gated stack: " + std::to_string(shared) + " bytes of shared memory for " + std::to_string(a.c) +
                       " channels, the device allows " + std::to_string(shared_limit));
  STRIDER_ASSIGN_OR_RETURN(launch->launcher,
                           (column_kernel<GatedStackEntry, GatedStackLaunch::Launcher>(dtype, a.q, shared, "gated stack")));
  return Status::ok();
}

Status run_gated_stack(const GatedStackLaunch& launch, cudaStream_t stream) {
  if (launch.blocks == 0) return Status::ok();
  const cudaError_t error = launch.launcher(launch.args, stream);
  return error == cudaSuccess ? Status::ok() : device_error(std::string("gated stack launch failed: ") + cudaGetErrorString(error));
}

}  // namespace strider::cuda
