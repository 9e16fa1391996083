// MaxPool (with its optional Indices output) and AveragePool on the GPU: one thread per
// output element walks its window, exactly as the CPU's PoolKernel::pool_one does, over
// views of any strides. Spatial dims are padded to three by leading size-1 dims, which
// change neither the window nor the flat indices. Output elements are numbered in the
// output's memory order (channels innermost for channels-last views) so that
// neighbouring threads write neighbouring addresses.
#include <cuda/std/limits>
#include <cuda/std/type_traits>

#include "hal/cuda/dependent_launch.cuh"
#include "hal/cuda/launch.h"
#include "ops/window_taps.h"

namespace strider::cuda {
namespace {

using namespace device;

constexpr int D = kMaxPoolDims;

template <typename T>
using PoolAcc = std::conditional_t<std::is_same_v<T, double>, double, float>;

// i % size, leaving i / size in i (`div`: size as a FastDivisor, for i below 2^31).
__device__ __forceinline__ int64_t next_coordinate(int64_t& i, int64_t size, const FastDivisor& div, bool fast) {
  if (fast) {
    uint32_t q = fast_divide(uint32_t(i), div);
    int64_t r = int64_t(uint32_t(i) - q * div.divisor);
    i = q;
    return r;
  }
  int64_t r = i % size;
  i /= size;
  return r;
}

// Output element i as (n, c, o[]).
__device__ __forceinline__ void output_index(const PoolArgs& a, int64_t i, int64_t& n, int64_t& c, int64_t (&o)[D]) {
  const bool fast = a.count <= int64_t(INT32_MAX);
  if (a.channels_last) c = next_coordinate(i, a.channels, a.channels_div, fast);
#pragma unroll
  for (int d = D - 1; d >= 0; --d) o[d] = next_coordinate(i, a.out[d], a.out_div[d], fast);
  if (!a.channels_last) c = next_coordinate(i, a.channels, a.channels_div, fast);
  n = i;
}

template <typename T, bool kMax>
__global__ void __launch_bounds__(kThreads) pool_kernel(const PoolArgs a) {
  device::order_after_producers();
  using A = PoolAcc<T>;
  for (int64_t i = global_thread(); i < a.count; i += grid_threads()) {
    int64_t n, c, o[D], start[D];
    output_index(a, i, n, c, o);
    int64_t padded = 1;  // window positions inside the padded input (count_include_pad)
#pragma unroll
    for (int d = 0; d < D; ++d) {
      start[d] = o[d] * a.stride[d] - a.pad_begin[d];
      const int64_t window_end = start[d] + (a.kernel[d] - 1) * a.dilation[d] + 1;
      const int64_t end = window_end < a.in[d] + a.pad_end[d] ? window_end : a.in[d] + a.pad_end[d];
      padded *= (end - start[d] + a.dilation[d] - 1) / a.dilation[d];
    }
    // A window wholly in the padding: the lowest value of T (-inf for floats).
    const A lowest = ::cuda::std::is_integral_v<T> ? A(::cuda::std::numeric_limits<T>::lowest())
                                                  : -::cuda::std::numeric_limits<A>::infinity();
    A acc = kMax ? lowest : A(0);
    int64_t best = -1, valid = 0;
    const int64_t base = n * a.x_strides[0] + c * a.x_strides[1];
    // Only the taps inside the input (ops/window_taps.h): a huge declared kernel costs
    // no more than the input's extent.
    TapRange r[D];
#pragma unroll
    for (int d = 0; d < D; ++d) r[d] = taps_inside(start[d], a.dilation[d], a.kernel[d], a.in[d]);
    for (int64_t k0 = r[0].first; k0 < r[0].end; ++k0) {
      const int64_t p0 = start[0] + k0 * a.dilation[0];
      for (int64_t k1 = r[1].first; k1 < r[1].end; ++k1) {
        const int64_t p1 = start[1] + k1 * a.dilation[1];
        for (int64_t k2 = r[2].first; k2 < r[2].end; ++k2) {
          const int64_t p2 = start[2] + k2 * a.dilation[2];
          A v = A(load<T>(a.x, base + p0 * a.x_strides[2] + p1 * a.x_strides[3] + p2 * a.x_strides[4]));
          ++valid;
          if constexpr (!kMax) {
            acc += v;
          } else if (v > acc || best < 0) {
            acc = v;
            best = a.column_major_indices ? p0 + a.in[0] * (p1 + a.in[1] * p2) : (p0 * a.in[1] + p1) * a.in[2] + p2;
          }
        }
      }
    }
    if constexpr (!kMax) {
      int64_t divisor = a.count_include_pad ? padded : valid;
      acc = divisor > 0 ? acc / A(divisor) : A(0);
    }
    int64_t y = n * a.y_strides[0] + c * a.y_strides[1];
#pragma unroll
    for (int d = 0; d < D; ++d) y += o[d] * a.y_strides[d + 2];
    store<T>(a.y, y, Compute<T>(acc));
    if (kMax && a.indices) {
      int64_t at = n * a.i_strides[0] + c * a.i_strides[1];
#pragma unroll
      for (int d = 0; d < D; ++d) at += o[d] * a.i_strides[d + 2];
      a.indices[at] = (n * a.channels + c) * (a.in[0] * a.in[1] * a.in[2]) + best;
    }
  }
}

// A 2-D max pool without indices over channels-last views whose channel runs are
// kLanes-aligned (YOLOv8n's SPPF: pool_kernel's 64-bit window walk over 16-bit scalars ran
// at 1% of the memory ceiling): kLanes channels of one output a thread, one vector load a
// tap, 32-bit indices. The same selection as pool_kernel's, lane by lane: the first tap
// inside the input, then any strictly greater one (so a NaN is kept only where it comes
// first), and the lowest value for a window wholly in the padding.
template <typename T>
__global__ void __launch_bounds__(kThreads) max_pool_2d_lanes(const PoolArgs a) {
  device::order_after_producers();
  const int64_t i = global_thread();
  if (i >= a.count / kLanes) return;
  // (n, oh, ow, channel group), channels innermost; a.out[0] == 1 (2-D).
  const FastDivisor& groups = a.channels_div;  // channels / kLanes (prepare_pool)
  uint32_t rest = uint32_t(i);
  uint32_t q = fast_divide(rest, groups);
  const int c = int(rest - q * groups.divisor) * kLanes;
  rest = q, q = fast_divide(rest, a.out_div[2]);
  const int ow = int(rest - q * a.out_div[2].divisor);
  rest = q, q = fast_divide(rest, a.out_div[1]);
  const int oh = int(rest - q * a.out_div[1].divisor), n = int(q);
  const int h0 = oh * int(a.stride[1]) - int(a.pad_begin[1]), w0 = ow * int(a.stride[2]) - int(a.pad_begin[2]);
  const Bits<T>* x = static_cast<const Bits<T>*>(a.x) + n * a.x_strides[0] + c;
  float acc[kLanes];
  bool any = false;
  for (int r = 0; r < int(a.kernel[1]); ++r) {
    const int ih = h0 + r * int(a.dilation[1]);
    if (ih < 0 || ih >= int(a.in[1])) continue;
    for (int s = 0; s < int(a.kernel[2]); ++s) {
      const int iw = w0 + s * int(a.dilation[2]);
      if (iw < 0 || iw >= int(a.in[2])) continue;
      float v[kLanes];
      load_lanes<T>(x + ih * a.x_strides[3] + iw * a.x_strides[4], v);
#pragma unroll
      for (int l = 0; l < kLanes; ++l)
        if (!any || v[l] > acc[l]) acc[l] = v[l];
      any = true;
    }
  }
  if (!any)
#pragma unroll
    for (int l = 0; l < kLanes; ++l) acc[l] = -::cuda::std::numeric_limits<float>::infinity();
  store_lanes<T>(static_cast<Bits<T>*>(a.y) + n * a.y_strides[0] + c + oh * a.y_strides[3] + ow * a.y_strides[4], acc);
}

template <typename T, bool kMax>
cudaError_t launch_pool(const PoolArgs& a, cudaStream_t stream) {
  if constexpr (kMax && (std::is_same_v<T, float> || std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>)) {
    if (a.lanes) {
      const int64_t threads = a.count / kLanes;
      launch_dependent(max_pool_2d_lanes<T>, unsigned((threads + kThreads - 1) / kThreads), kThreads, 0, stream, a);
      return cudaGetLastError();
    }
  }
  launch_dependent(pool_kernel<T, kMax>, grid_for(a.count, kThreads), kThreads, 0, stream, a);
  return cudaGetLastError();
}

// max_pool_2d_lanes' condition: a 2-D max pool without indices in f32, bf16 or f16 over
// channels-last views whose every kLanes-channel run is vector-aligned (sizes, strides,
// addresses), with 32-bit positions.
bool max_pool_lanes_apply(const PoolSpec& s, const PoolArgs& a) {
  const DType t = s.x.dtype;
  if (!s.max || s.indices.allocation || s.kernel.size() != 2 || (t != DType::kF32 && t != DType::kBF16 && t != DType::kF16))
    return false;
  if (!a.channels_last || s.x.strides[1] != 1 || s.y.strides[1] != 1 || a.channels % kLanes != 0) return false;
  for (size_t d : {size_t(0), size_t(3), size_t(4)})
    if (a.x_strides[d] % kLanes != 0 || a.y_strides[d] % kLanes != 0 || a.x_strides[d] < 0 || a.y_strides[d] < 0) return false;
  const uintptr_t vector_bytes = uintptr_t(kLanes * dtype_size(t));
  if (reinterpret_cast<uintptr_t>(a.x) % vector_bytes != 0 || reinterpret_cast<uintptr_t>(a.y) % vector_bytes != 0) return false;
  const int64_t limit = int64_t(INT32_MAX) / 4;  // positions, strides and products stay in 32 bits
  return a.count < limit && s.x.num_elements() < limit && a.in[1] < limit && a.in[2] < limit;
}

Status select_launcher(const PoolSpec& s, PoolLaunch* l) {
  const bool m = s.max;
  switch (s.x.dtype) {
    case DType::kF32: l->launcher = m ? &launch_pool<float, true> : &launch_pool<float, false>; break;
    case DType::kF16: l->launcher = m ? &launch_pool<__half, true> : &launch_pool<__half, false>; break;
    case DType::kBF16: l->launcher = m ? &launch_pool<__nv_bfloat16, true> : &launch_pool<__nv_bfloat16, false>; break;
    case DType::kF64: l->launcher = m ? &launch_pool<double, true> : &launch_pool<double, false>; break;
    case DType::kI8:
      if (!m) return unsupported("no CUDA average pool for i8");
      l->launcher = &launch_pool<int8_t, true>;
      break;
    case DType::kU8:
      if (!m) return unsupported("no CUDA average pool for u8");
      l->launcher = &launch_pool<uint8_t, true>;
      break;
    default: return unsupported("no CUDA pool for " + std::string(dtype_name(s.x.dtype)));
  }
  return Status::ok();
}

}  // namespace

Status prepare_pool(const PoolSpec& s, PoolLaunch* l) {
  const size_t spatial = s.kernel.size();
  if (spatial < 1 || spatial > size_t(D) || s.x.rank() != int64_t(spatial) + 2 || s.y.rank() != s.x.rank())
    return unsupported("CUDA pools take 1 to 3 spatial dims, got " + s.x.to_string() + " -> " + s.y.to_string());
  if (s.x.dtype != s.y.dtype) return internal_error("pool from " + s.x.to_string() + " to " + s.y.to_string());
  *l = PoolLaunch{};
  PoolArgs& a = l->args;
  a.count = s.y.num_elements();
  a.channels = s.y.sizes[1];
  a.channels_div = make_fast_divisor(a.channels);
  const size_t lead = size_t(D) - spatial;  // leading size-1 dims
  for (size_t d = 0; d < size_t(D); ++d) {
    const bool real = d >= lead;
    const size_t j = d - lead;  // index among the real spatial dims
    a.in[d] = real ? s.x.sizes[j + 2] : 1;
    a.out[d] = real ? s.y.sizes[j + 2] : 1;
    a.out_div[d] = make_fast_divisor(a.out[d]);
    a.kernel[d] = real ? s.kernel[j] : 1;
    a.stride[d] = real ? s.strides[j] : 1;
    a.dilation[d] = real ? s.dilations[j] : 1;
    a.pad_begin[d] = real ? s.pads_begin[j] : 0;
    a.pad_end[d] = real ? s.pads_end[j] : 0;
    a.x_strides[d + 2] = real ? s.x.strides[j + 2] : 0;
    a.y_strides[d + 2] = real ? s.y.strides[j + 2] : 0;
    a.i_strides[d + 2] = real && s.indices.allocation ? s.indices.strides[j + 2] : 0;
  }
  for (size_t d = 0; d < 2; ++d) {
    a.x_strides[d] = s.x.strides[d];
    a.y_strides[d] = s.y.strides[d];
    a.i_strides[d] = s.indices.allocation ? s.indices.strides[d] : 0;
  }
  a.x = device_data<const std::byte>(s.x);
  a.y = device_data<std::byte>(s.y);
  a.indices = s.indices.allocation ? device_data<int64_t>(s.indices) : nullptr;
  a.count_include_pad = s.count_include_pad;
  a.column_major_indices = s.column_major_indices;
  const int64_t innermost = s.y.strides.back() < 0 ? -s.y.strides.back() : s.y.strides.back();
  a.channels_last = s.y.sizes[1] > 1 && (s.y.strides[1] == 1 || s.y.strides[1] == -1) && innermost > 1;
  a.lanes = max_pool_lanes_apply(s, a);
  if (a.lanes) a.channels_div = make_fast_divisor(a.channels / kLanes);  // the lanes kernel counts channel groups
  return select_launcher(s, l);
}

Status run_pool(const PoolLaunch& l, cudaStream_t stream) {
  if (l.args.count == 0) return Status::ok();
  cudaError_t error = l.launcher(l.args, stream);
  if (error == cudaSuccess) return Status::ok();
  return device_error(std::string("pool kernel launch failed: ") + cudaGetErrorString(error));
}

}  // namespace strider::cuda
