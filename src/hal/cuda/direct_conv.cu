// Direct convolution (direct_conv.h): blockIdx.y is a group of kDirectOutputs output
// channels, whose weights the block stages in shared memory; each thread walks one output
// pixel's window once, and every input value it loads feeds kDirectOutputs accumulators
// (the weights of one tap are the same address for the whole warp: a broadcast).
// Pixels run width-fastest, so a warp of a channels-first input reads a row.
#include "hal/cuda/dependent_launch.cuh"
#include "hal/cuda/direct_conv.h"

namespace strider::cuda {
namespace {

using namespace device;
constexpr int kBlock = 128;

template <typename T>
__global__ void __launch_bounds__(kBlock) direct_conv_kernel(const DirectConvArgs a) {
  device::order_after_producers();
  extern __shared__ float group_weights[];  // [taps][kDirectOutputs]
  const int taps = a.c * a.kh * a.kw;
  const float* weights = a.weights + int64_t(blockIdx.y) * taps * kDirectOutputs;
  for (int i = threadIdx.x; i < taps * kDirectOutputs; i += blockDim.x) group_weights[i] = weights[i];
  __syncthreads();
  const int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p >= a.pixels) return;
  const uint32_t q0 = fast_divide(uint32_t(p), a.div_ow), q1 = fast_divide(q0, a.div_oh);
  const int ow = int(uint32_t(p) - q0 * a.div_ow.divisor), oh = int(q0 - q1 * a.div_oh.divisor), n = int(q1);
  const int first = int(blockIdx.y) * kDirectOutputs;
  float acc[kDirectOutputs];
#pragma unroll
  for (int j = 0; j < kDirectOutputs; ++j) acc[j] = a.bias ? a.bias[first + j] : 0.0f;
  const int h0 = oh * a.stride_h - a.pad_h, w0 = ow * a.stride_w - a.pad_w;
  const Bits<T>* x = static_cast<const Bits<T>*>(a.x) + n * a.xs[0];
  int tap = 0;
  for (int ch = 0; ch < a.c; ++ch) {
    const Bits<T>* plane = x + ch * a.xs[1];
    for (int r = 0; r < a.kh; ++r) {
      const int ih = h0 + r * a.dilation_h;
      const bool row_inside = ih >= 0 && ih < a.h;
      for (int s = 0; s < a.kw; ++s, ++tap) {
        const int iw = w0 + s * a.dilation_w;
        if (!row_inside || iw < 0 || iw >= a.w) continue;
        const float v = to_compute<T>(plane[ih * a.xs[2] + iw * a.xs[3]]);
        const float4* wt = reinterpret_cast<const float4*>(group_weights + tap * kDirectOutputs);
#pragma unroll
        for (int j = 0; j < kDirectOutputs / 4; ++j) {
          const float4 w4 = wt[j];
          acc[4 * j] = fmaf(v, w4.x, acc[4 * j]);
          acc[4 * j + 1] = fmaf(v, w4.y, acc[4 * j + 1]);
          acc[4 * j + 2] = fmaf(v, w4.z, acc[4 * j + 2]);
          acc[4 * j + 3] = fmaf(v, w4.w, acc[4 * j + 3]);
        }
      }
    }
  }
  Bits<T>* y = static_cast<Bits<T>*>(a.y) + n * a.ys[0] + oh * a.ys[2] + ow * a.ys[3];
  if (a.chunk_stores) {  // the group's channels side by side: whole 16-byte stores
    union {
      uint4 chunks[kDirectOutputs * sizeof(Bits<T>) / 16];
      Bits<T> values[kDirectOutputs];
    } out;
    with_activation(a.epilogue.activation, [&]<ConvActivation kAct>() {
#pragma unroll
      for (int j = 0; j < kDirectOutputs; ++j) out.values[j] = to_bits<T>(apply_activation<kAct>(a.epilogue, acc[j]));
    });
    uint4* chunk = reinterpret_cast<uint4*>(y + first);
#pragma unroll
    for (int i = 0; i < int(sizeof(out.chunks) / 16); ++i) chunk[i] = out.chunks[i];
    return;
  }
  with_activation(a.epilogue.activation, [&]<ConvActivation kAct>() {
#pragma unroll
    for (int j = 0; j < kDirectOutputs; ++j)
      if (first + j < a.k) y[(first + j) * a.ys[1]] = to_bits<T>(apply_activation<kAct>(a.epilogue, acc[j]));
  });
}

template <typename T>
cudaError_t launch_direct_conv(const DirectConvArgs& a, cudaStream_t stream) {
  const dim3 grid(unsigned((a.pixels + kBlock - 1) / kBlock), unsigned((a.k + kDirectOutputs - 1) / kDirectOutputs));
  const size_t shared = size_t(a.c) * a.kh * a.kw * kDirectOutputs * sizeof(float);
  launch_dependent(direct_conv_kernel<T>, grid, kBlock, shared, stream, a);
  return cudaGetLastError();
}

}  // namespace

Status prepare_direct_conv(DType dtype, DirectConvLaunch* l) {
  DirectConvArgs& a = l->args;
  a.pixels = int64_t(a.n) * a.oh * a.ow;
  if (a.pixels >= int64_t(INT32_MAX)) return unsupported("direct convolution of 2^31 output pixels or more");
  if (int64_t(a.c) * a.kh * a.kw > kMaxDirectTaps) return unsupported("direct convolution of too many taps");
  a.div_ow = make_fast_divisor(a.ow);
  a.div_oh = make_fast_divisor(a.oh);
  // Channels-last y whose groups of kDirectOutputs channels start on 16 bytes: a thread
  // stores its group whole. Element by element, a warp's eight stores each touched 32
  // pixels' sectors (the first layer of MobileNetV2 at batch 32: 0.177 ms).
  const int64_t size = dtype == DType::kF32 ? 4 : 2, chunk = 16 / size;
  a.chunk_stores = a.ys[1] == 1 && a.k % kDirectOutputs == 0 && reinterpret_cast<uintptr_t>(a.y) % 16 == 0;
  for (int d : {0, 2, 3}) a.chunk_stores = a.chunk_stores && a.ys[d] % chunk == 0;
  switch (dtype) {
    case DType::kF32: l->launcher = &launch_direct_conv<float>; break;
    case DType::kBF16: l->launcher = &launch_direct_conv<__nv_bfloat16>; break;
    case DType::kF16: l->launcher = &launch_direct_conv<__half>; break;
    default: return unsupported("direct convolution on this dtype");
  }
  return Status::ok();
}

Status run_direct_conv(const DirectConvLaunch& l, cudaStream_t stream) {
  if (l.args.pixels == 0 || l.args.k == 0) return Status::ok();
  cudaError_t error = l.launcher(l.args, stream);
  if (error == cudaSuccess) return Status::ok();
  return device_error(std::string("direct convolution launch failed: ") + cudaGetErrorString(error));
}

}  // namespace strider::cuda
