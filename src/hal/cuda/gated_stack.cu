// FusedGatedStack's kernel (gated_stack.h): a block's tile of columns through every unit
// in shared memory.
#include <string>

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

// The block's columns of x into h [C][columns] as f32 (zeros past the last column). A
// warp's elements run along channels where x's channels are neighbours (channels-last),
// else along columns: neighbouring elements in memory either way.
template <typename T>
__device__ __forceinline__ void load_tile(const GatedStackArgs& a, const int64_t* x_off, int columns, float* h) {
  const int c = a.c;
  const bool channels_inner = a.x_channel == 1;
  for (int e = int(threadIdx.x); e < c * columns; e += blockDim.x) {
    const int k = channels_inner ? e % c : e / columns, p = channels_inner ? e / c : e % columns;
    h[k * columns + p] = x_off[p] >= 0 ? load<T>(a.x, x_off[p] + k * a.x_channel) : 0.0f;
  }
}

// h [C][columns] into the block's columns of y, in y's order as load_tile reads x.
template <typename T>
__device__ __forceinline__ void store_tile(const GatedStackArgs& a, const int64_t* y_off, int columns, const float* h) {
  const int c = a.c;
  const bool channels_inner = a.y_channel == 1;
  for (int e = int(threadIdx.x); e < c * columns; e += blockDim.x) {
    const int k = channels_inner ? e % c : e / columns, p = channels_inner ? e / c : e % columns;
    if (y_off[p] >= 0) store<T>(a.y, y_off[p] + k * a.y_channel, h[k * columns + p]);
  }
}

// Thread (k, g): channel k of column group g, Q columns [g Q, g Q + Q) of the block's P.
// Shared memory: x's and y's offsets of the P columns (-1 past the last column), then h
// [C][P] as f32.
template <typename T, int Q>
__global__ void __launch_bounds__(kThreads) gated_stack_kernel(const GatedStackArgs a) {
  device::order_after_producers();
  extern __shared__ __align__(16) unsigned char shared[];
  const int c = a.c, columns = a.groups * Q;
  int64_t* x_off = reinterpret_cast<int64_t*>(shared);
  int64_t* y_off = x_off + columns;
  float* h = reinterpret_cast<float*>(y_off + columns);
  const int64_t first = int64_t(blockIdx.x) * columns;
  for (int p = int(threadIdx.x); p < columns; p += blockDim.x) {
    int64_t xo = -1, yo = -1;
    if (first + p < a.columns) column_offsets(a, first + p, &xo, &yo);
    x_off[p] = xo, y_off[p] = yo;
  }
  __syncthreads();
  load_tile<T>(a, x_off, columns, h);
  __syncthreads();
  const int k = int(threadIdx.x) % c, g = int(threadIdx.x) / c;
  const bool active = g < a.groups;
  const int64_t unit_floats = 2 * int64_t(c) * c + 2 * c;
  for (int u = 0; u < a.units; ++u) {
    const float* wt = a.weights + u * unit_floats;
    float acc_a[Q], acc_b[Q];
#pragma unroll
    for (int q = 0; q < Q; ++q) acc_a[q] = 0.0f, acc_b[q] = 0.0f;
    if (active) {
#pragma unroll 4
      for (int j = 0; j < c; ++j) {
        const float wa = __ldg(wt + j * 2 * c + k), wb = __ldg(wt + j * 2 * c + c + k);
        const float* hj = h + j * columns + g * Q;
        float hv[Q];
        if constexpr (Q % 4 == 0) {
#pragma unroll
          for (int q = 0; q < Q; q += 4) {  // hj + q is 16-byte aligned: columns and g Q are multiples of 4
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
    __syncthreads();  // every thread has read this unit's h
    if (active) {
      const float* bias = wt + 2 * int64_t(c) * c;
      const float ba = __ldg(bias + k), bb = __ldg(bias + c + k);
#pragma unroll
      for (int q = 0; q < Q; ++q) {
        float* hq = h + k * columns + g * Q + q;
        *hq = gated_residual(*hq, acc_a[q] + ba, acc_b[q] + bb);
      }
    }
    __syncthreads();
  }
  store_tile<T>(a, y_off, columns, h);
}

template <typename T, int Q>
cudaError_t launch(const GatedStackArgs& a, cudaStream_t stream) {
  const int columns = a.groups * Q;
  const size_t shared = size_t(columns) * 2 * sizeof(int64_t) + size_t(a.c) * columns * sizeof(float);
  const int64_t blocks = (a.columns + columns - 1) / columns;
  return launch_dependent(gated_stack_kernel<T, Q>, dim3(unsigned(blocks)), dim3(kThreads), shared, stream, a);
}

template <typename T>
GatedStackLaunch::Launcher launcher_for(int q) {
  switch (q) {
    case 8: return launch<T, 8>;
    case 4: return launch<T, 4>;
    case 2: return launch<T, 2>;
    default: return launch<T, 1>;
  }
}

}  // namespace

Status prepare_gated_stack(DType dtype, int sms, GatedStackLaunch* launch) {
  GatedStackArgs& a = launch->args;
  if (a.c < 1 || a.c > kGatedStackMaxChannels || a.spatial_rank < 1 || a.spatial_rank > 3)
    return unsupported("gated stack: " + std::to_string(a.c) + " channels, " + std::to_string(a.spatial_rank) +
                       " spatial axes (the kernel takes 1-128 and 1-3)");
  a.groups = kThreads / a.c;
  // The most columns a thread may carry while the launch still has a block for every
  // multiprocessor: more columns share each weight load, more blocks fill the GPU.
  a.q = 1;
  for (int q : {8, 4, 2}) {
    const int64_t per_block = int64_t(a.groups) * q;
    if ((a.columns + per_block - 1) / per_block >= sms) {
      a.q = q;
      break;
    }
  }
  const int64_t blocks = (a.columns + int64_t(a.groups) * a.q - 1) / (int64_t(a.groups) * a.q);
  if (blocks > INT32_MAX) return unsupported("gated stack: too many pixels for one launch");
  launch->blocks = int32_t(blocks);
  switch (dtype) {
    case DType::kF32: launch->launcher = launcher_for<float>(a.q); break;
    case DType::kBF16: launch->launcher = launcher_for<__nv_bfloat16>(a.q); break;
    case DType::kF16: launch->launcher = launcher_for<__half>(a.q); break;
    default: return unsupported("gated stack: no kernel for this dtype");
  }
  return Status::ok();
}

Status run_gated_stack(const GatedStackLaunch& launch, cudaStream_t stream) {
  if (launch.blocks == 0) return Status::ok();
  const cudaError_t error = launch.launcher(launch.args, stream);
  return error == cudaSuccess ? Status::ok() : device_error(std::string("gated stack launch failed: ") + cudaGetErrorString(error));
}

}  // namespace strider::cuda
