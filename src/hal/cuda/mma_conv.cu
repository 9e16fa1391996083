// Tensor-core convolution over channel rows (mma_conv.h). A block owns 64 output channels
// and takes 64 output pixels at a time. For each tap and each 64-channel step of the input
// it copies the pixels' input rows (zeros where the tap falls outside) and the step's
// weights into shared memory by cp.async, one step ahead of the multiplication; each warp
// multiplies its 16 pixels by the 64 channels with mma.sync m16n8k16, fragments by
// ldmatrix (the weights are output-channel-major, as the attention's K tile). The epilogue
// applies the bias and activation to the f32 accumulators, then store_outputs adds the
// addends and stores.
//
// Why a pipeline: MobileNetV2's expansions (16-96 input channels, 401408 pixels at batch
// 32) are a few MMAs per 16-byte load; one tile a block with synchronous staging held
// about 2 KB of loads in flight a block and ran them at ~0.9 TB/s (0.118 ms for the
// 112x112 one, session 24, H100), far from the memory's 3-4 TB/s.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "hal/cuda/mma_conv.h"
#include "hal/cuda/mma_tiles.cuh"

namespace strider::cuda {
namespace {

using namespace device;
constexpr int kTile = kMmaConvTile, kThreads = 128, kWarpRows = 16;
constexpr int kLd = kTile + 8;  // padded rows: ldmatrix's eight rows fall in distinct banks
constexpr int kChunks = kTile / 8;  // 16-byte chunks of a staged row
constexpr int kEach = kTile * kChunks / kThreads;
static_assert(kThreads / 32 * kWarpRows == kTile);

// 16-byte asynchronous copies (cp.async, sm_80+): the next step's tiles load while the
// tensor cores work on this one's. A copy of no bytes zero-fills its chunk.
__device__ __forceinline__ void copy_async(void* shared, const void* global, bool inside) {
  const unsigned at = unsigned(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(at), "l"(global), "r"(inside ? 16 : 0));
}
__device__ __forceinline__ void commit_copies() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void wait_copies() { asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending)); }

// Where output pixel p reads (its batch's offset in x, its first row and column before a
// tap's shift) and writes (its row in y, -1 past the last pixel).
struct PixelRows {
  int64_t x_batch = 0, y_row = -1;
  int32_t x_row = 0, x_col = INT32_MIN / 2;  // every tap outside
};
__device__ __forceinline__ PixelRows pixel_rows(const MmaConvArgs& a, int64_t p) {
  PixelRows rows;
  if (p >= a.pixels) return rows;
  const uint32_t q0 = fast_divide(uint32_t(p), a.div_ow), q1 = fast_divide(q0, a.div_oh);
  const int64_t ow = int64_t(uint32_t(p) - q0 * a.div_ow.divisor), oh = q0 - q1 * a.div_oh.divisor, n = q1;
  rows.x_batch = n * a.xs[0];
  rows.x_row = int32_t(oh) * a.stride_h - a.pad_h;
  rows.x_col = int32_t(ow) * a.stride_w - a.pad_w;
  rows.y_row = n * a.ys[0] + oh * a.ys[2] + ow * a.ys[3];
  return rows;
}

// Starts the copies of input channels [c0, c0 + 64) of tap `tap` (row-major over the
// window) for pixels [p0, p0 + 64)
// and, unless the weights stay (`weights_too` false), the same channels of the block's
// output channels' weights. Zeros past C and where the tap falls outside.
__device__ __forceinline__ void stage_step(const MmaConvArgs& a, uint16_t* a_tile, uint16_t* b_tile, int64_t p0,
                                           int n0, int tap, int c0, bool weights_too) {
  const uint16_t* x = static_cast<const uint16_t*>(a.x);
  const uint16_t* w = static_cast<const uint16_t*>(a.weights);
  const int taps = a.kh * a.kw, tap_row = tap / a.kw, tap_col = tap % a.kw;
#pragma unroll
  for (int k = 0; k < kEach; ++k) {
    const int at = int(threadIdx.x) + k * kThreads, r = at / kChunks, ch = at % kChunks * 8;
    const PixelRows rows = pixel_rows(a, p0 + r);
    const int row = rows.x_row + tap_row * a.dilation_h, col = rows.x_col + tap_col * a.dilation_w;
    const bool inside = row >= 0 && row < a.h && col >= 0 && col < a.w && c0 + ch < a.c;
    copy_async(a_tile + r * kLd + ch, inside ? x + rows.x_batch + row * a.xs[2] + col * a.xs[3] + c0 + ch : x, inside);
    if (weights_too)
      copy_async(b_tile + r * kLd + ch, w + (int64_t(n0 + r) * taps + tap) * a.c_pad + c0 + ch, c0 + ch < a.c);
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

// Shared memory: two stages of A and B tiles (uint16_t), then the f32 outputs, then the
// output tile's y rows.
constexpr int kStageElements = 2 * kTile * kLd;  // A and B
constexpr size_t kSharedBytes = 2 * kStageElements * sizeof(uint16_t) + kTile * kOutLd * sizeof(float) + kTile * sizeof(int64_t);

// One warp's 16 pixels x 64 channels of a staged step; `steps` 16-channel steps (zeros
// past C are skipped).
template <typename T>
__device__ __forceinline__ void multiply_step(float (&acc)[kTile / 8][4], const uint16_t* a_tile, const uint16_t* b_tile,
                                              int warp, int lane, int steps) {
  const int matrix = lane / 8, matrix_row = lane % 8;
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

// The accumulators with bias and activation applied, as f32 rows of `out`; then zeroed.
__device__ __forceinline__ void stage_outputs(const MmaConvArgs& a, float (&acc)[kTile / 8][4], float* out, int n0,
                                              int warp, int lane) {
  const int g = lane / 4, t = lane % 4;
  // Fragment element i of acc[f]: pixel row g (+8 for i >= 2), channel 8f + 2t (+1 if i odd).
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = warp * kWarpRows + g + 8 * half;
#pragma unroll
    for (int f = 0; f < kTile / 8; ++f) {
      const int ch = f * 8 + 2 * t;
      float2 v = make_float2(acc[f][2 * half], acc[f][2 * half + 1]);
      if (a.bias) v.x += a.bias[n0 + ch], v.y += a.bias[n0 + ch + 1];  // padded to whole tiles
      v.x = apply_conv_epilogue(a.epilogue, v.x), v.y = apply_conv_epilogue(a.epilogue, v.y);
      *reinterpret_cast<float2*>(out + r * kOutLd + ch) = v;
      acc[f][2 * half] = acc[f][2 * half + 1] = 0.0f;
    }
  }
}

// A block keeps one tile of 64 weight rows (blockIdx.y) and takes the pixel tiles
// blockIdx.x, + gridDim.x, ... (the grid holds as many blocks as fit on the GPU at once).
// Its steps (tap, 64-channel slice) run through every tile it takes as one sequence, two
// stages deep: the copies of step s + 1, the next tile's first included, are in flight
// while the tensor cores multiply step s and while a tile's outputs are stored. With one
// step a tile the weights are staged once.
template <typename T>
__global__ void __launch_bounds__(kThreads) mma_conv_kernel(const MmaConvArgs a) {
  extern __shared__ __align__(16) unsigned char shared[];
  uint16_t* stages = reinterpret_cast<uint16_t*>(shared);
  float* out = reinterpret_cast<float*>(stages + 2 * kStageElements);
  int64_t* y_row = reinterpret_cast<int64_t*>(out + kTile * kOutLd);
  const int thread = int(threadIdx.x), warp = thread / 32, lane = thread % 32;
  const int n0 = int(blockIdx.y) * kTile;
  const int64_t tiles = (a.pixels + kTile - 1) / kTile;
  const int c_steps = (a.c + kTile - 1) / kTile, tile_steps = a.kh * a.kw * c_steps;
  const int64_t my_tiles = (tiles - blockIdx.x + gridDim.x - 1) / gridDim.x;
  const int64_t total = my_tiles * tile_steps;
  const bool weights_stay = tile_steps == 1;
  // Step s: tile blockIdx.x + (s / tile_steps) * gridDim.x, tap and channel slice of s % tile_steps.
  auto stage = [&](int64_t s) {
    uint16_t* a_tile = stages + (s % 2) * kStageElements;
    uint16_t* b_tile = (weights_stay ? stages : a_tile) + kTile * kLd;
    const int within = int(s % tile_steps), tap = within / c_steps, c0 = within % c_steps * kTile;
    const int64_t p0 = (blockIdx.x + (s / tile_steps) * gridDim.x) * kTile;
    stage_step(a, a_tile, b_tile, p0, n0, tap, c0, !weights_stay || s == 0);
    commit_copies();
  };
  float acc[kTile / 8][4] = {};
  if (total > 0) stage(0);
  for (int64_t s = 0; s < total; ++s) {
    if (s + 1 < total) {
      stage(s + 1);
      wait_copies<1>();
    } else {
      wait_copies<0>();
    }
    __syncthreads();
    const uint16_t* a_tile = stages + (s % 2) * kStageElements;
    const uint16_t* b_tile = (weights_stay ? stages : a_tile) + kTile * kLd;
    const int c0 = int(s % tile_steps) % c_steps * kTile;
    multiply_step<T>(acc, a_tile, b_tile, warp, lane, min(kTile / 16, (a.c - c0 + 15) / 16));
    if (s % tile_steps == tile_steps - 1) {
      const int64_t p0 = (blockIdx.x + (s / tile_steps) * gridDim.x) * kTile;
      stage_outputs(a, acc, out, n0, warp, lane);
      if (thread < kTile) y_row[thread] = pixel_rows(a, p0 + thread).y_row;
      __syncthreads();
      store_outputs<T>(a, out, y_row, a.gated ? int(blockIdx.y) * kTile / 2 : n0);
    }
    // Step s + 2 reuses this step's stage (and the next tile, out and y_row).
    __syncthreads();
  }
}

template <typename T>
cudaError_t launch_mma_conv(const MmaConvArgs& a, cudaStream_t stream) {
  mma_conv_kernel<T><<<dim3(unsigned(a.grid_pixel_tiles), unsigned(mma_conv_tiles(a))), kThreads, kSharedBytes, stream>>>(a);
  return cudaGetLastError();
}

// More than 48 KB of shared memory (set on the current device, each time: cheap); then the
// grid: as many blocks as are resident at once on that device, at most one a pixel tile.
template <typename T>
Status size_grid(MmaConvArgs& a) {
  int device = 0, sms = 0, per_sm = 0;
  cudaError_t e = cudaFuncSetAttribute(mma_conv_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSharedBytes));
  if (e == cudaSuccess) e = cudaGetDevice(&device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (e == cudaSuccess) e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, mma_conv_kernel<T>, kThreads, kSharedBytes);
  if (e != cudaSuccess) return device_error(std::string("tensor-core convolution: ") + cudaGetErrorString(e));
  const int64_t resident = std::max<int64_t>(1, int64_t(sms) * per_sm / mma_conv_tiles(a));
  a.grid_pixel_tiles = std::min<int64_t>((a.pixels + kTile - 1) / kTile, resident);
  return Status::ok();
}

}  // namespace

bool mma_conv_rows(const int64_t (&sizes)[4], const int64_t (&strides)[4], int64_t offset, int64_t multiple) {
  if (strides[1] != 1 && sizes[1] > 1) return false;
  for (int d : {0, 2, 3})
    if (sizes[d] > 1 && strides[d] % multiple != 0) return false;
  return offset % multiple == 0;
}

Status prepare_mma_conv(DType dtype, MmaConvLaunch* l) {
  MmaConvArgs& a = l->args;
  a.pixels = int64_t(a.n) * a.oh * a.ow;
  if (a.pixels >= int64_t(INT32_MAX)) return unsupported("tensor-core convolution of 2^31 output pixels or more");
  if (a.c % 8 != 0 || a.c_pad % kTile != 0 || a.c_pad < a.c) return unsupported("tensor-core convolution: channels");
  if (a.kw < 1 || a.kh < 1 || a.kh * a.kw > kMaxMmaConvTaps) return unsupported("tensor-core convolution: window");
  if (a.addend_count > kMaxMmaConvAddends) return unsupported("tensor-core convolution: addends");
  a.div_ow = make_fast_divisor(a.ow);
  a.div_oh = make_fast_divisor(a.oh);
  switch (dtype) {
    case DType::kBF16: l->launcher = &launch_mma_conv<__nv_bfloat16>; return size_grid<__nv_bfloat16>(a);
    case DType::kF16: l->launcher = &launch_mma_conv<__half>; return size_grid<__half>(a);
    default: return unsupported("tensor-core convolution on this dtype");
  }
}

Status run_mma_conv(const MmaConvLaunch& l, cudaStream_t stream) {
  if (l.args.pixels == 0 || l.args.k == 0) return Status::ok();
  cudaError_t error = l.launcher(l.args, stream);
  if (error == cudaSuccess) return Status::ok();
  return device_error(std::string("tensor-core convolution launch failed: ") + cudaGetErrorString(error));
}

}  // namespace strider::cuda
