// FusedWaveNetLayer's kernel (wavenet_layer.h): a block's tile of time steps through the
// gate and both projections in shared memory.
#include <string>

#include "hal/cuda/column_kernels.cuh"
#include "hal/cuda/copy_async.cuh"
#include "hal/cuda/dependent_launch.cuh"
#include "hal/cuda/launch.h"
#include "hal/cuda/wavenet_layer.h"
#include "ops/gated_stack_math.h"

namespace strider::cuda {
namespace {

using namespace device;

// The tile's shared memory, carved from the dynamic allocation (wavenet_layer_shared_bytes).
struct Tile {
  float* weights;
  int32_t *image, *step;  // each column's
  float* x;               // args.tiles tiles [C][ld]: X at t + tap_offset[i]
  float *g, *s;           // [C][ld] each
  int columns, valid, ld;
};

template <int Q>
__device__ __forceinline__ Tile carve(const WaveNetLayerArgs& a, unsigned char* shared) {
  Tile t;
  t.columns = a.groups * Q;
  t.ld = wavenet_row_stride(t.columns, Q);
  const int padded = (t.columns + 3) / 4 * 4;
  t.weights = reinterpret_cast<float*>(shared);
  t.image = reinterpret_cast<int32_t*>(t.weights + wavenet_layer_weight_floats(a.c, a.taps));
  t.step = t.image + padded;
  t.x = reinterpret_cast<float*>(t.step + padded);
  t.g = t.x + int64_t(a.tiles) * a.c * t.ld;
  t.s = t.g + int64_t(a.c) * t.ld;
  const int64_t first = int64_t(blockIdx.x) * t.columns;
  t.valid = int(min(int64_t(t.columns), a.columns - first));
  return t;
}

// Every tile of X: element (k, p) of tile i is X[n, k, t + tap_offset[i]] for column p's
// image n and step t, zero outside [0, T) and past the valid columns. A warp's elements
// run along channels where X's channels are neighbours (channels-last), else along steps.
template <typename T>
__device__ __forceinline__ void load_tiles(const WaveNetLayerArgs& a, const Tile& t) {
  const int c = a.c;
  const bool channels_inner = a.x_channel == 1;
  for (int i = 0; i < a.tiles; ++i)
    for (int e = int(threadIdx.x); e < c * t.columns; e += blockDim.x) {
      const int k = channels_inner ? e % c : e / t.columns, p = channels_inner ? e / c : e % t.columns;
      const int64_t step = p < t.valid ? int64_t(t.step[p]) + a.tap_offset[i] : -1;
      t.x[(int64_t(i) * c + k) * t.ld + p] =
          step >= 0 && step < a.steps
              ? load<T>(a.x, t.image[p] * a.x_image + k * a.x_channel + step * a.x_step)
              : 0.0f;
    }
}

// One output's first `valid` columns from `tile` [C][ld] into its view, in its order.
template <typename T>
__device__ __forceinline__ void store_output(const WaveNetLayerView& v, int c, const Tile& t, const float* tile) {
  const bool channels_inner = v.channel == 1;
  for (int e = int(threadIdx.x); e < c * t.valid; e += blockDim.x) {
    const int k = channels_inner ? e % c : e / t.valid, p = channels_inner ? e / c : e % t.valid;
    store<T>(v.data, t.image[p] * v.image + k * v.channel + int64_t(t.step[p]) * v.step, tile[k * t.ld + p]);
  }
}

// Q columns [g Q, g Q + Q) of row j of `tile` into v.
template <int Q>
__device__ __forceinline__ void read_columns(const float* row, float* v) {
  if constexpr (Q % 4 == 0) {
#pragma unroll
    for (int q = 0; q < Q; q += 4) {  // 16-byte aligned: ld and g Q are multiples of 4
      const float4 f = *reinterpret_cast<const float4*>(row + q);
      v[q] = f.x, v[q + 1] = f.y, v[q + 2] = f.z, v[q + 3] = f.w;
    }
  } else {
#pragma unroll
    for (int q = 0; q < Q; ++q) v[q] = row[q];
  }
}

// Thread (k, g)'s gate for its Q columns, into G's tile.
template <int Q>
__device__ __forceinline__ void gate_columns(const WaveNetLayerArgs& a, const Tile& t, int k, int g) {
  const int c = a.c;
  const float* bias = t.weights + wavenet_gate_bias_at(c, a.taps);
  float acc_a[Q], acc_b[Q];
#pragma unroll
  for (int q = 0; q < Q; ++q) acc_a[q] = bias[k], acc_b[q] = bias[c + k];
  for (int i = 0; i < a.taps; ++i) {
    const float* w = t.weights + int64_t(i) * c * 2 * c;
    const float* x = t.x + int64_t(i) * c * t.ld + g * Q;
#pragma unroll 4
    for (int j = 0; j < c; ++j) {
      const float wa = w[j * 2 * c + k], wb = w[j * 2 * c + c + k];
      float v[Q];
      read_columns<Q>(x + j * t.ld, v);
#pragma unroll
      for (int q = 0; q < Q; ++q) acc_a[q] = fmaf(wa, v[q], acc_a[q]), acc_b[q] = fmaf(wb, v[q], acc_b[q]);
    }
  }
#pragma unroll
  for (int q = 0; q < Q; ++q) t.g[k * t.ld + g * Q + q] = gate_of(acc_a[q], acc_b[q]);
}

// Thread (k, g)'s projections of G for its Q columns: Y over the residual tile (X at
// offset 0, each element read and written by its own thread), S into S's tile.
template <int Q>
__device__ __forceinline__ void project_columns(const WaveNetLayerArgs& a, const Tile& t, int k, int g) {
  const int c = a.c;
  const float* wr = t.weights + wavenet_residual_at(c, a.taps);
  const float* ws = t.weights + wavenet_skip_at(c, a.taps);
  float r[Q], s[Q];
#pragma unroll
  for (int q = 0; q < Q; ++q) r[q] = wr[c * c + k], s[q] = ws[c * c + k];
#pragma unroll 4
  for (int j = 0; j < c; ++j) {
    const float wrj = wr[j * c + k], wsj = ws[j * c + k];
    float v[Q];
    read_columns<Q>(t.g + j * t.ld + g * Q, v);
#pragma unroll
    for (int q = 0; q < Q; ++q) r[q] = fmaf(wrj, v[q], r[q]), s[q] = fmaf(wsj, v[q], s[q]);
  }
  float* x = t.x + int64_t(a.residual_tile) * c * t.ld + k * t.ld + g * Q;
#pragma unroll
  for (int q = 0; q < Q; ++q) {
    x[q] = fused_math::apply<FusedOp::kAdd>(x[q], r[q], 0.0f, 0.0f);
    t.s[k * t.ld + g * Q + q] = s[q];
  }
}

// Thread (k, g): channel k of column group g, Q columns [g Q, g Q + Q) of the block's P.
template <typename T, int Q>
__global__ void __launch_bounds__(kThreads) wavenet_layer_kernel(const WaveNetLayerArgs a) {
  device::order_after_producers();
  extern __shared__ __align__(16) unsigned char shared[];
  const Tile t = carve<Q>(a, shared);
  const int64_t weight_vectors = wavenet_layer_weight_floats(a.c, a.taps) / 4;
  for (int64_t i = threadIdx.x; i < weight_vectors; i += blockDim.x)
    copy_async_16(reinterpret_cast<float4*>(t.weights) + i, reinterpret_cast<const float4*>(a.weights) + i);
  copy_async_commit();
  const int64_t first = int64_t(blockIdx.x) * t.columns;
  for (int p = int(threadIdx.x); p < t.valid; p += blockDim.x) {
    const int64_t column = first + p, image = column / a.steps;
    t.image[p] = int32_t(image), t.step[p] = int32_t(column - image * a.steps);
  }
  __syncthreads();
  load_tiles<T>(a, t);
  copy_async_wait<0>();
  __syncthreads();  // the weights and every tile are in place
  const int k = int(threadIdx.x) % a.c, g = int(threadIdx.x) / a.c;
  const bool active = g < a.groups;
  if (active) gate_columns<Q>(a, t, k, g);
  __syncthreads();  // G whole
  if (active && (a.y.data || a.s.data)) project_columns<Q>(a, t, k, g);
  __syncthreads();
  if (a.y.data) store_output<T>(a.y, a.c, t, t.x + int64_t(a.residual_tile) * a.c * t.ld);
  if (a.s.data) store_output<T>(a.s, a.c, t, t.s);
  if (a.g.data) store_output<T>(a.g, a.c, t, t.g);
}

// The kernel for storage T and Q columns a thread, as column_kernels.cuh picks them.
template <typename T, int Q>
struct WaveNetLayerEntry {
  static cudaError_t launch(const WaveNetLayerArgs& a, cudaStream_t stream) {
    const int columns = a.groups * Q;
    const int64_t blocks = (a.columns + columns - 1) / columns;
    return launch_dependent(wavenet_layer_kernel<T, Q>, dim3(unsigned(blocks)), dim3(kThreads),
                            wavenet_layer_shared_bytes(a.c, a.taps, a.tiles, a.groups, Q), stream, a);
  }
  static cudaError_t allow(size_t bytes) {
    return cudaFuncSetAttribute(wavenet_layer_kernel<T, Q>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
  }
};

}  // namespace

Status prepare_wavenet_layer(DType dtype, int sms, size_t shared_limit, WaveNetLayerLaunch* launch) {
  WaveNetLayerArgs& a = launch->args;
  if (a.c < 1 || a.c > kWaveNetLayerMaxChannels || a.taps < 1 || a.taps > kWaveNetLayerMaxTaps || a.steps < 1 ||
      a.steps > INT32_MAX || a.columns / a.steps > INT32_MAX)
    return unsupported("WaveNet layer: " + std::to_string(a.c) + " channels, " + std::to_string(a.taps) +
                       " taps (the kernel takes 1-64 and 1-3, and fewer than 2^31 images and steps)");
  a.groups = kThreads / a.c;
  a.q = columns_per_thread(a.columns, a.groups, sms, [&](int q) {
    return wavenet_layer_shared_bytes(a.c, a.taps, a.tiles, a.groups, q) <= shared_limit;
  });
  launch->shared = wavenet_layer_shared_bytes(a.c, a.taps, a.tiles, a.groups, a.q);
  if (launch->shared > shared_limit)
    return unsupported("WaveNet layer: " + std::to_string(launch->shared) + " bytes of shared memory, the device allows " +
                       std::to_string(shared_limit));
  const int64_t blocks = (a.columns + int64_t(a.groups) * a.q - 1) / (int64_t(a.groups) * a.q);
  if (blocks > INT32_MAX) return unsupported("WaveNet layer: too many steps for one launch");
  launch->blocks = int32_t(blocks);
  STRIDER_ASSIGN_OR_RETURN(launch->launcher, (column_kernel<WaveNetLayerEntry, WaveNetLayerLaunch::Launcher>(
                                                 dtype, a.q, launch->shared, "WaveNet layer")));
  return Status::ok();
}

Status run_wavenet_layer(const WaveNetLayerLaunch& launch, cudaStream_t stream) {
  if (launch.blocks == 0) return Status::ok();
  const cudaError_t error = launch.launcher(launch.args, stream);
  return error == cudaSuccess ? Status::ok()
                              : device_error(std::string("WaveNet layer launch failed: ") + cudaGetErrorString(error));
}

}  // namespace strider::cuda
