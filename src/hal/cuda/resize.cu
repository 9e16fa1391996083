// Resize / Upsample on the GPU: a gather over tap tables computed on the host when the
// kernel is created (src/ops/resize_taps.h, the CPU kernel's taps). One thread per output
// element, numbered in the output's memory order (the dims arrive sorted: the output's
// innermost memory dim last), so writes are coalesced in NCHW and NHWC alike.
//  - gather (nearest, and any resize whose every dim has one tap of weight 1): raw
//    words of the element size, one load per output; dims that are not resized read
//    input x at output x through their stride, without a table;
//  - interpolate (linear, cubic, antialias): the sum over the product of the per-dim
//    taps of weight products times input elements, in f32 (f64 for f64).
// tf_crop_and_resize writes the extrapolation value where any coordinate is outside.
#include "hal/cuda/dependent_launch.cuh"
#include "hal/cuda/launch.h"

namespace strider::cuda {
namespace {

using namespace device;

// Outputs per thread and loop step of the gather (loads first, then stores).
constexpr int kUnroll = 4;

// Output element i's coordinate along each loop dim, its output offset, the input offset
// of its one-tap dims and whether any of its coordinates is extrapolated. I is the index
// type: int32_t when every offset of both views fits (ResizeArgs::small), else int64_t.
template <typename I>
struct Position {
  I coord[kMaxDims];
  I out = 0, in = 0;
  bool outside = false;
};

// Over the first `rank` loop dims (all, or all but the innermost for vector gathers).
template <typename I>
__device__ __forceinline__ Position<I> position(const ResizeArgs& a, int64_t linear, int rank) {
  Position<I> p;
  uint32_t rest = uint32_t(linear);
#pragma unroll
  for (int d = kMaxDims - 1; d >= 0; --d) {
    if (d >= rank) continue;
    const ResizeAxis& axis = a.axes[d];
    I x;
    if constexpr (std::is_same_v<I, int32_t>) {
      const uint32_t q = fast_divide(rest, a.div[d]);
      x = I(rest - q * a.div[d].divisor);
      rest = q;
    } else {
      x = linear % axis.size;
      linear /= axis.size;
    }
    p.coord[d] = x;
    p.out += x * I(axis.out_stride);
    if (axis.identity) p.in += x * I(axis.in_stride);
    else if (axis.width == 1) p.in += I(a.offsets[axis.table + x]);
    if (a.outside && a.outside[axis.flags + x]) p.outside = true;
  }
  return p;
}

template <typename W>
struct alignas(4 * sizeof(W)) Words4 {
  W v[4];
};

// Outputs 4g..4g+3 of the innermost dim (contiguous in the output) with one index
// computation and one 4-word store.
template <typename W, typename I>
__device__ __forceinline__ void gather_four(const ResizeArgs& a, int64_t g, W fill) {
  int64_t x0;
  Position<I> p;
  if constexpr (std::is_same_v<I, int32_t>) {
    const uint32_t q = fast_divide(uint32_t(g), a.inner_div);
    x0 = 4 * int64_t(uint32_t(g) - q * a.inner_div.divisor);
    p = position<I>(a, q, a.rank - 1);
  } else {
    x0 = 4 * (g % int64_t(a.inner_div.divisor));
    p = position<I>(a, g / int64_t(a.inner_div.divisor), a.rank - 1);
  }
  Words4<W> out;
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const int64_t x = x0 + u;
    const I in = p.in + (a.inner.identity ? I(x * a.inner.in_stride) : I(a.offsets[a.inner.table + x]));
    const bool outside = p.outside || (a.outside && a.outside[a.inner.flags + x]);
    out.v[u] = outside ? fill : static_cast<const W*>(a.x)[in];
  }
  *reinterpret_cast<Words4<W>*>(static_cast<W*>(a.y) + p.out + x0) = out;
}

template <typename W, typename I>
__global__ void __launch_bounds__(kThreads) gather_kernel(const ResizeArgs a) {
  device::order_after_producers();
  const W fill = W(a.fill_bits);
  const int64_t step = grid_threads();
  if (a.vector) {
    for (int64_t g = global_thread(); g < a.count / 4; g += step) gather_four<W, I>(a, g, fill);
    return;
  }
  const W* x = static_cast<const W*>(a.x);
  W* y = static_cast<W*>(a.y);
  for (int64_t i = global_thread(); i < a.count; i += step * kUnroll) {
    W value[kUnroll];
    I out[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (i + u * step >= a.count) break;
      Position<I> p = position<I>(a, i + u * step, a.rank);
      out[u] = p.out;
      value[u] = p.outside ? fill : x[p.in];
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (i + u * step >= a.count) break;
      y[out[u]] = value[u];
    }
  }
}

// The weighted sum over every combination of the taps of the dims with more than one,
// walked as an odometer (the last dim fastest).
template <typename T, typename I>
__global__ void __launch_bounds__(kThreads) interpolate_kernel(const ResizeArgs a) {
  device::order_after_producers();
  using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const A* weights = static_cast<const A*>(a.weights);
  for (int64_t i = global_thread(); i < a.count; i += grid_threads()) {
    const Position<I> p = position<I>(a, i, a.rank);
    I tap[kMaxDims] = {};
    A acc = 0;
    for (bool more = true; more;) {
      I in = p.in;
      A weight = 1;
#pragma unroll
      for (int d = 0; d < kMaxDims; ++d) {
        if (d >= a.rank || a.axes[d].width == 1) continue;
        const int64_t entry = a.axes[d].table + int64_t(p.coord[d]) * a.axes[d].width + tap[d];
        in += I(a.offsets[entry]);
        weight *= weights[entry];
      }
      acc += weight * A(load<T>(a.x, in));
      more = false;
#pragma unroll
      for (int d = kMaxDims - 1; d >= 0; --d) {
        if (more || d >= a.rank || a.axes[d].width == 1) continue;
        if (++tap[d] < I(a.axes[d].width)) more = true;
        else tap[d] = 0;
      }
    }
    store<T>(a.y, p.out, Compute<T>(p.outside ? A(a.extrapolation) : acc));
  }
}

template <typename W>
cudaError_t launch_gather(const ResizeArgs& a, cudaStream_t stream) {
  unsigned grid = grid_for((a.count + kUnroll - 1) / kUnroll, kThreads);  // 4 outputs per thread either way
  if (a.small) launch_dependent(gather_kernel<W, int32_t>, grid, kThreads, 0, stream, a);
  else launch_dependent(gather_kernel<W, int64_t>, grid, kThreads, 0, stream, a);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_interpolate(const ResizeArgs& a, cudaStream_t stream) {
  if (a.small) launch_dependent(interpolate_kernel<T, int32_t>, grid_for(a.count, kThreads), kThreads, 0, stream, a);
  else launch_dependent(interpolate_kernel<T, int64_t>, grid_for(a.count, kThreads), kThreads, 0, stream, a);
  return cudaGetLastError();
}

// Whether every element offset of `v` fits in int32 (so does every partial sum of them).
bool fits_int32(const TensorView& v) {
  int64_t reach = 0;
  for (size_t d = 0; d < v.sizes.size(); ++d) reach += (v.sizes[d] > 0 ? v.sizes[d] - 1 : 0) * (v.strides[d] < 0 ? -v.strides[d] : v.strides[d]);
  return reach <= int64_t(INT32_MAX);
}

Status select_launcher(const ResizeSpec& s, ResizeLaunch* l) {
  if (s.weights == nullptr) {
    dispatch_words(dtype_size(s.y.dtype), [&]<typename Word>() { l->launcher = &launch_gather<Word>; });
    return Status::ok();
  }
  switch (s.y.dtype) {
    case DType::kF32: l->launcher = &launch_interpolate<float>; break;
    case DType::kF16: l->launcher = &launch_interpolate<__half>; break;
    case DType::kBF16: l->launcher = &launch_interpolate<__nv_bfloat16>; break;
    case DType::kF64: l->launcher = &launch_interpolate<double>; break;
    default: return unsupported("no CUDA interpolating resize for " + std::string(dtype_name(s.y.dtype)));
  }
  return Status::ok();
}

}  // namespace

Status prepare_resize(const ResizeSpec& s, uint64_t fill_bits, ResizeLaunch* l) {
  if (s.axes.empty() || s.axes.size() > size_t(kMaxDims))
    return unsupported("CUDA resize of rank " + std::to_string(s.axes.size()) + "; at most " + std::to_string(kMaxDims));
  if (s.x.dtype != s.y.dtype) return internal_error("resize from " + s.x.to_string() + " to " + s.y.to_string());
  *l = ResizeLaunch{};
  ResizeArgs& a = l->args;
  a.rank = int(s.axes.size());
  a.count = 1;
  for (size_t d = 0; d < s.axes.size(); ++d) {
    a.axes[d] = s.axes[d];
    a.div[d] = make_fast_divisor(s.axes[d].size);
    a.count *= s.axes[d].size;
  }
  a.offsets = s.offsets;
  a.weights = s.weights;
  a.outside = s.outside;
  a.x = device_data<const std::byte>(s.x);
  a.y = device_data<std::byte>(s.y);
  a.extrapolation = s.extrapolation;
  a.fill_bits = fill_bits;
  a.small = a.count <= int64_t(INT32_MAX) && fits_int32(s.x) && fits_int32(s.y);
  // Vector gathers: the innermost dim a multiple of 4, contiguous, every 4-group aligned.
  const ResizeAxis& inner = s.axes.back();
  a.vector = s.weights == nullptr && inner.size % 4 == 0 && inner.out_stride == 1 &&
             reinterpret_cast<uintptr_t>(a.y) % uintptr_t(4 * dtype_size(s.y.dtype)) == 0;
  for (size_t d = 0; d + 1 < s.axes.size() && a.vector; ++d) a.vector = s.axes[d].out_stride % 4 == 0;
  a.inner = inner;
  a.inner_div = make_fast_divisor(inner.size / 4);
  return select_launcher(s, l);
}

Status run_resize(const ResizeLaunch& l, cudaStream_t stream) {
  if (l.args.count == 0) return Status::ok();
  cudaError_t error = l.launcher(l.args, stream);
  if (error == cudaSuccess) return Status::ok();
  return device_error(std::string("resize kernel launch failed: ") + cudaGetErrorString(error));
}

}  // namespace strider::cuda
