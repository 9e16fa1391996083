// Tensor-core convolution over channel rows (mma_conv.h). A block owns 64 output pixels x
// 64 output channels. For each tap and each 64-channel step of the input it stages the
// pixels' input rows (zeros where the tap falls outside) and the step's weights in shared
// memory, 16-byte chunks all in flight before they are stored (with STRIDER_CUDA_MMA_PIPELINE=on
// two buffers deep: the next step's loads are issued before this step's products; measured
// flat in session 43, so opt-in); then each warp multiplies its 16 pixels by the 64 channels
// with mma.sync m16n8k16, fragments by ldmatrix (the weights are output-channel-major, as
// the attention's K tile). The epilogue stores the f32 accumulators plus bias in shared
// memory, applies the activation there, then store_outputs adds the addends and stores.
//
// The pixel decomposition (n, oh, ow) is made once per block into shared memory: the
// staging loop then needs only a tap's column shift per row.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdlib>
#include <string_view>

#include "hal/cuda/dependent_launch.cuh"
#include "hal/cuda/mma_conv.h"
#include "hal/cuda/mma_tiles.cuh"

namespace strider::cuda {
namespace {

using namespace device;
constexpr int kTile = kMmaConvTile, kThreads = 128, kWarpRows = 16;
constexpr int kLd = kTile + 8;  // padded rows: ldmatrix's eight rows fall in distinct banks
constexpr int kChunks = kTile / 8;  // 16-byte chunks of a staged row
constexpr int kEach = kTile * kChunks / kThreads;
constexpr int kBufferElements = kTile * kLd;  // one staged tile (A or B) of a step
static_assert(kThreads / 32 * kWarpRows == kTile);

// One step's operands in flight: input channels [c0, c0 + 64) of tap `tap` for the block's
// pixels, and the same channels of the block's output channels' weights, 16-byte chunks
// loaded into registers (load_step) and then stored to a shared buffer (store_step).
struct StepChunks {
  uint4 in[kEach], weight[kEach];
};

__device__ __forceinline__ void load_step(const MmaConvArgs& a, StepChunks& s, const int64_t* x_row, const int32_t* x_col,
                                          int n0, int tap, int c0) {
  const uint16_t* x = static_cast<const uint16_t*>(a.x);
  const uint16_t* w = static_cast<const uint16_t*>(a.weights);
#pragma unroll
  for (int k = 0; k < kEach; ++k) {
    const int at = int(threadIdx.x) + k * kThreads, r = at / kChunks, ch = at % kChunks * 8;
    const int col = x_col[r] + tap * a.dilation_w;
    s.in[k] = make_uint4(0, 0, 0, 0);
    if (col >= 0 && col < a.w && c0 + ch < a.c)
      s.in[k] = *reinterpret_cast<const uint4*>(x + x_row[r] + col * a.xs[3] + c0 + ch);
    s.weight[k] = make_uint4(0, 0, 0, 0);  // zeros past C: a 16-wide step may span them
    if (c0 + ch < a.c) s.weight[k] = *reinterpret_cast<const uint4*>(w + (int64_t(n0 + r) * a.kw + tap) * a.c_pad + c0 + ch);
  }
}

__device__ __forceinline__ void store_step(const StepChunks& s, uint16_t* a_tile, uint16_t* b_tile) {
#pragma unroll
  for (int k = 0; k < kEach; ++k) {
    const int at = int(threadIdx.x) + k * kThreads, r = at / kChunks, ch = at % kChunks * 8;
    *reinterpret_cast<uint4*>(a_tile + r * kLd + ch) = s.in[k];
    *reinterpret_cast<uint4*>(b_tile + r * kLd + ch) = s.weight[k];
  }
}

// The warp's 16 pixels times the 64 output channels over one staged step of `channels`
// input channels (zeros past C are skipped), into acc.
template <typename T>
__device__ __forceinline__ void multiply_step(const uint16_t* a_tile, const uint16_t* b_tile, int channels, float (&acc)[kTile / 8][4]) {
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32, matrix = lane / 8, matrix_row = lane % 8;
  const int steps = min(kTile / 16, (channels + 15) / 16);
#pragma unroll
  for (int k = 0; k < kTile / 16; ++k) {
    if (k >= steps) break;
    uint32_t af[4];
    mma::ldmatrix_x4(af, a_tile + (warp * kWarpRows + matrix % 2 * 8 + matrix_row) * kLd + k * 16 + matrix / 2 * 8);
#pragma unroll
    for (int f = 0; f < kTile / 8; f += 2) {
      uint32_t b[4];  // output channels 8f.. and 8(f + 1).., input channels 16k.. and 16k + 8..
      mma::ldmatrix_x4(b, b_tile + ((f + matrix / 2) * 8 + matrix_row) * kLd + k * 16 + matrix % 2 * 8);
      mma::mma_16816<T>(acc[f], af, b[0], b[1]);
      mma::mma_16816<T>(acc[f + 1], af, b[2], b[3]);
    }
  }
}

// The block's outputs, staged in shared memory as f32 with the bias and activation
// applied, leave in 16-byte chunks of 8 channels where y's rows allow (chunk_stores), each
// chunk's addends read as one chunk too; element by element otherwise. Stored from the
// fragments directly, a warp's store touched 8 rows x 16 bytes: half of every sector.
constexpr int kOutLd = kTile + 8;  // floats: 16-byte aligned rows

// Output column `ch` of a staged row: the value, or the gate of the row's pair of halves
// with the map kernels' own scalar math (fused_math).
__device__ __forceinline__ float output_at(const MmaConvArgs& a, const float* row, int ch) {
  using fused_math::apply;
  if (!a.gated) return row[ch];
  const float gate = apply<FusedOp::kTanh>(row[ch], 0.0f, 0.0f, 0.0f);
  return apply<FusedOp::kMul>(gate, apply<FusedOp::kSigmoid>(row[ch + kTile / 2], 0.0f, 0.0f, 0.0f), 0.0f, 0.0f);
}

// `n0` is the block's first output channel of y.
template <typename T>
__device__ __forceinline__ void store_outputs(const MmaConvArgs& a, const float* out, const int64_t* y_row, int n0) {
  Bits<T>* y = static_cast<Bits<T>*>(a.y);
  const int width = a.gated ? kTile / 2 : kTile;  // y's channels a block writes
  if (a.chunk_stores) {
    for (int at = int(threadIdx.x); at < kTile * kChunks; at += kThreads) {
      const int r = at / kChunks, ch = at % kChunks * 8;
      const int64_t row = y_row[r];
      if (row < 0 || ch >= width || n0 + ch >= a.k) continue;
      float v[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] = output_at(a, out + r * kOutLd, ch + i);
      for (int k = 0; k < a.addend_count; ++k) {
        const uint4 bits = *reinterpret_cast<const uint4*>(static_cast<const Bits<T>*>(a.addends[k]) + row + n0 + ch);
        const Bits<T>* e = reinterpret_cast<const Bits<T>*>(&bits);
#pragma unroll
        for (int i = 0; i < 8; ++i) v[i] += to_compute<T>(e[i]);
      }
      uint4 packed;
      Bits<T>* p = reinterpret_cast<Bits<T>*>(&packed);
#pragma unroll
      for (int i = 0; i < 8; ++i) p[i] = to_bits<T>(v[i]);
      *reinterpret_cast<uint4*>(y + row + n0 + ch) = packed;
    }
    return;
  }
  for (int at = int(threadIdx.x); at < kTile * kTile; at += kThreads) {
    const int r = at / kTile, ch = at % kTile;
    const int64_t row = y_row[r];
    if (row < 0 || ch >= width || n0 + ch >= a.k) continue;
    float v = output_at(a, out + r * kOutLd, ch);
    for (int k = 0; k < a.addend_count; ++k) v += to_compute<T>(static_cast<const Bits<T>*>(a.addends[k])[row + n0 + ch]);
    y[row + n0 + ch] = to_bits<T>(v);
  }
}

template <typename T, bool kTwoBuffers>
__global__ void __launch_bounds__(kThreads) mma_conv_kernel(const MmaConvArgs a) {
  device::order_after_producers();
  // The A tiles of two steps, then their B tiles; after the last step, the f32 outputs
  // (store_outputs).
  constexpr int kBuffers = kTwoBuffers ? 2 : 1;
  __shared__ __align__(16) uint16_t tiles[2 * kBuffers * kBufferElements > 2 * kTile * kOutLd ? 2 * kBuffers * kBufferElements
                                                                                             : 2 * kTile * kOutLd];
  uint16_t* a_tile = tiles;
  uint16_t* b_tile = tiles + kBuffers * kBufferElements;
  __shared__ int64_t x_row[kTile], y_row[kTile];
  __shared__ int32_t x_col[kTile];
  const int thread = int(threadIdx.x), warp = thread / 32, lane = thread % 32, g = lane / 4, t = lane % 4;
  const int64_t p0 = int64_t(blockIdx.x) * kTile;
  const int n0 = int(blockIdx.y) * kTile;
  if (thread < kTile) {
    const int64_t p = p0 + thread;
    if (p < a.pixels) {
      const uint32_t q0 = fast_divide(uint32_t(p), a.div_ow), q1 = fast_divide(q0, a.div_oh);
      const int64_t ow = int64_t(uint32_t(p) - q0 * a.div_ow.divisor), oh = q0 - q1 * a.div_oh.divisor, n = q1;
      x_row[thread] = n * a.xs[0] + oh * a.xs[2];
      x_col[thread] = int32_t(ow) * a.stride_w - a.pad_w;
      y_row[thread] = n * a.ys[0] + oh * a.ys[2] + ow * a.ys[3];
    } else {
      x_row[thread] = 0, x_col[thread] = INT32_MIN / 2, y_row[thread] = -1;  // every tap outside
    }
  }
  __syncthreads();
  // Two shared buffers: step s + 1's chunks are loaded into registers before step s is
  // multiplied and stored into the other buffer after it, so the loads' latency hides behind
  // the tensor cores' work; one barrier a step (it also keeps a buffer from being
  // overwritten while a warp still reads it two steps back).
  float acc[kTile / 8][4] = {};
  const int channel_steps = (a.c + kTile - 1) / kTile, steps = a.kw * channel_steps;
  StepChunks chunks;
  load_step(a, chunks, x_row, x_col, n0, 0, 0);
  store_step(chunks, a_tile, b_tile);
  __syncthreads();
  for (int step = 0; step < steps; ++step) {
    const int buffer = step % 2, c0 = step % channel_steps * kTile;
    if constexpr (!kTwoBuffers) {  // one buffer, the loads then the products (A/B timing)
      if (step > 0) {
        load_step(a, chunks, x_row, x_col, n0, step / channel_steps, c0);
        store_step(chunks, a_tile, b_tile);
        __syncthreads();
      }
      multiply_step<T>(a_tile, b_tile, a.c - c0, acc);
      __syncthreads();
      continue;
    }
    const bool more = step + 1 < steps;
    if (more) load_step(a, chunks, x_row, x_col, n0, (step + 1) / channel_steps, (step + 1) % channel_steps * kTile);
    multiply_step<T>(a_tile + buffer * kBufferElements, b_tile + buffer * kBufferElements, a.c - c0, acc);
    if (more) store_step(chunks, a_tile + (1 - buffer) * kBufferElements, b_tile + (1 - buffer) * kBufferElements);
    __syncthreads();
  }
  // Fragment element i of acc[f]: pixel row g (+8 for i >= 2), channel 8f + 2t (+1 if i odd).
  float* out = reinterpret_cast<float*>(tiles);  // the last step's closing sync freed the tiles
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = warp * kWarpRows + g + 8 * half;
#pragma unroll
    for (int f = 0; f < kTile / 8; ++f) {
      const int ch = f * 8 + 2 * t;
      float2 v = make_float2(acc[f][2 * half], acc[f][2 * half + 1]);
      if (a.bias) v.x += a.bias[n0 + ch], v.y += a.bias[n0 + ch + 1];  // padded to whole tiles
      *reinterpret_cast<float2*>(out + r * kOutLd + ch) = v;
    }
  }
  __syncthreads();
  // The activation over the tile in place, in a loop with one copy of its code: applied to
  // the fragments above it was 32 inlined copies of its switch (a 120 KB kernel).
  if (a.epilogue.activation != ConvActivation::kNone) {
#pragma unroll 1
    for (int at = thread; at < kTile * kTile; at += kThreads) {
      float& v = out[at / kTile * kOutLd + at % kTile];
      v = apply_conv_epilogue(a.epilogue, v);
    }
    __syncthreads();
  }
  store_outputs<T>(a, out, y_row, a.gated ? int(blockIdx.y) * kTile / 2 : n0);
}

template <typename T, bool kTwoBuffers>
cudaError_t launch_mma_conv(const MmaConvArgs& a, cudaStream_t stream) {
  const dim3 grid(unsigned((a.pixels + kTile - 1) / kTile), unsigned(mma_conv_tiles(a)));
  launch_dependent(mma_conv_kernel<T, kTwoBuffers>, grid, kThreads, 0, stream, a);
  return cudaGetLastError();
}

}  // namespace

bool mma_conv_rows(const int64_t (&sizes)[4], const int64_t (&strides)[4], int64_t offset, int64_t multiple) {
  if (strides[1] != 1 && sizes[1] > 1) return false;
  // Negative strides (a reversing Slice) are refused: the kernels mark a pixel past the
  // last as a row offset of -1, which a pixel reached by going back would also have.
  for (int d : {0, 2, 3})
    if (sizes[d] > 1 && (strides[d] % multiple != 0 || strides[d] < 0)) return false;
  return offset % multiple == 0;
}

Status prepare_mma_conv(DType dtype, MmaConvLaunch* l) {
  MmaConvArgs& a = l->args;
  a.pixels = int64_t(a.n) * a.oh * a.ow;
  if (a.pixels >= int64_t(INT32_MAX)) return unsupported("tensor-core convolution of 2^31 output pixels or more");
  if (a.c % 8 != 0 || a.c_pad % kTile != 0 || a.c_pad < a.c) return unsupported("tensor-core convolution: channels");
  if (a.kw < 1 || a.kw > kMaxMmaConvTaps || a.kh != 1 || a.stride_h != 1 || a.pad_h != 0 || a.oh != a.h) return unsupported("tensor-core convolution: window");
  if (a.addend_count > kMaxMmaConvAddends) return unsupported("tensor-core convolution: addends");
  a.div_ow = make_fast_divisor(a.ow);
  a.div_oh = make_fast_divisor(a.oh);
  // Two staging buffers only with STRIDER_CUDA_MMA_PIPELINE=on until a GPU has run the
  // kernel suite with them (written in session 42, whose device call for it did not start);
  // one buffer is the kernel every earlier GPU run checked.
  const char* pipeline = std::getenv("STRIDER_CUDA_MMA_PIPELINE");
  const bool two_buffers = pipeline && std::string_view(pipeline) == "on";
  switch (dtype) {
    case DType::kBF16:
      l->launcher = two_buffers ? &launch_mma_conv<__nv_bfloat16, true> : &launch_mma_conv<__nv_bfloat16, false>;
      break;
    case DType::kF16: l->launcher = two_buffers ? &launch_mma_conv<__half, true> : &launch_mma_conv<__half, false>; break;
    default: return unsupported("tensor-core convolution on this dtype");
  }
  return Status::ok();
}

Status run_mma_conv(const MmaConvLaunch& l, cudaStream_t stream) {
  if (l.args.pixels == 0 || l.args.k == 0) return Status::ok();
  cudaError_t error = l.launcher(l.args, stream);
  if (error == cudaSuccess) return Status::ok();
  return device_error(std::string("tensor-core convolution launch failed: ") + cudaGetErrorString(error));
}

}  // namespace strider::cuda
