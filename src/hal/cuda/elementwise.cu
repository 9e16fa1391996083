// Elementwise CUDA kernels: out = fn(in...) over views of any strides, as the CPU's
// MapKernel computes them (same functors, same compute types: f32 for f32/f16/bf16, f64
// for f64, the type itself for integers; bool is one byte 0/1).
//
// One kernel template serves every op; each instantiation (op functor x dtypes) is made
// only for the dtype combinations the op supports, listed in select_launcher. Elements
// are addressed in one of three ways, chosen when the launch is prepared:
//  - vector: the innermost collapsed dim is a multiple of 4 elements, contiguous in the
//    output and in every input that does not broadcast along it, and 4-element aligned:
//    each thread takes 4 neighbouring elements with one index computation and 16-byte
//    (4-element) loads and stores (dense tensors, and channel slices in channels-last);
//  - linear: the index space collapsed to one dim: offset = i * stride per operand;
//  - strided: the general case through the collapsed StridedIndexer.
// Only kernels of the types models spend their time in (f32, f16, bf16, bool and the
// words Where selects) have the vector mode and the unrolled loop: the integer and f64
// kernels (shape arithmetic, tests) take one element per thread step. The vector
// variants of all ~400 instantiations made this file take four minutes to compile.
#include <cuda/std/limits>
#include <cuda/std/tuple>
#include <utility>

#include "hal/cuda/launch.h"

namespace strider::cuda {
namespace {

using namespace device;

enum : int { kModeVector = 0, kModeLinear = 1, kModeStrided = 2 };

template <int N>
struct MapArgs {
  int mode;
  uint32_t inner_broadcast;  // vector mode: bit k set when operand k broadcasts along the innermost dim
  StridedIndexer<N> ix;      // vector mode: over groups of 4 innermost elements
  FastDivisor div[kMaxDims];
  void* data[N];
  MapParams params;
};

// Operands whose dtype is only known at run time (Pow's exponent, Cast's source), read
// as double (floating sources, and Pow's integer exponents) or int64 (integer sources).
struct AnyAsDouble {};
struct AnyAsInt {};

template <typename T> struct Operand {
  static constexpr bool kDynamic = false;
  __device__ static Compute<T> load(const MapParams&, const void* base, int64_t offset) {
    return device::load<T>(base, offset);
  }
};

__device__ __forceinline__ int64_t load_int64(DType dtype, const void* base, int64_t offset) {
  switch (dtype) {
    case DType::kI64: return device::load<int64_t>(base, offset);
    case DType::kI32: return device::load<int32_t>(base, offset);
    case DType::kI8: return device::load<int8_t>(base, offset);
    case DType::kU8: return device::load<uint8_t>(base, offset);
    default: return device::load<bool>(base, offset) ? 1 : 0;
  }
}
__device__ __forceinline__ double load_double(DType dtype, const void* base, int64_t offset) {
  switch (dtype) {
    case DType::kF32: return device::load<float>(base, offset);
    case DType::kF16: return device::load<__half>(base, offset);
    case DType::kBF16: return device::load<__nv_bfloat16>(base, offset);
    case DType::kF64: return device::load<double>(base, offset);
    default: return double(load_int64(dtype, base, offset));
  }
}

template <> struct Operand<AnyAsDouble> {
  static constexpr bool kDynamic = true;
  __device__ static double load(const MapParams& p, const void* base, int64_t offset) {
    return load_double(p.dynamic, base, offset);
  }
};
template <> struct Operand<AnyAsInt> {
  static constexpr bool kDynamic = true;
  __device__ static int64_t load(const MapParams& p, const void* base, int64_t offset) {
    return load_int64(p.dynamic, base, offset);
  }
};

// ---- functors: each is made in the kernel from the launch's MapParams ---------------
struct NoParams {
  __device__ explicit NoParams(const MapParams&) {}
};

// A row of the table in ops/elementwise_math.h, with the node's parameters.
template <class F>
struct FromTable : F {
  __device__ explicit FromTable(const MapParams& p) : F{ElementwiseParams{p.scalars[0], p.scalars[1]}} {}
};

// Where on raw words of the element size: a select needs no arithmetic.
struct Select : NoParams { using NoParams::NoParams;
  template <class W> __device__ W operator()(bool c, W a, W b) const { return c ? a : b; } };

// Clip: min(max(x, low), high), so low > high gives high everywhere, as ONNX says. The
// bounds are the inputs when given (read on the device at each run), else the
// attributes (float types) or the type's limits (integers).
template <typename T>
struct Clip {
  using C = Compute<T>;
  C low, high;
  __device__ explicit Clip(const MapParams& p) {
    if constexpr (std::is_integral_v<C>) {
      low = ::cuda::std::numeric_limits<C>::lowest();
      high = ::cuda::std::numeric_limits<C>::max();
    } else {
      low = C(p.scalars[0]);
      high = C(p.scalars[1]);
    }
    if (p.bounds[0]) low = device::load<T>(p.bounds[0], 0);
    if (p.bounds[1]) high = device::load<T>(p.bounds[1], 0);
  }
  __device__ C operator()(C x) const {
    C raised = x < low ? low : x;
    return raised > high ? high : raised;
  }
};

// An integer power by squaring when the exponent is a small non-negative integer: exact
// where the product is (std::pow on the CPU is exact there too).
__device__ __forceinline__ double integral_pow(double base, double exponent) {
  if (exponent >= 0 && exponent <= 64 && exponent == floor(exponent)) {
    double result = 1;
    for (int e = int(exponent); e != 0; e >>= 1, base *= base)
      if (e & 1) result *= base;
    return result;
  }
  return pow(base, exponent);
}

// Pow: the base's type computes; the exponent is read as double whatever its dtype.
template <typename B>
struct Pow : NoParams {
  using NoParams::NoParams;
  using C = Compute<B>;
  __device__ C operator()(C base, double exponent) const {
    if constexpr (std::is_integral_v<C>) return C(integral_pow(double(base), exponent));
    else return C(::pow(base, C(exponent)));
  }
};

// Cast as the CPU's CastTo: float to integer truncates toward zero, NaN becomes 0 and
// out-of-range values saturate; integers wrap; to bool is x != 0.
template <typename TOut>
struct CastTo : NoParams {
  using NoParams::NoParams;
  using R = Compute<TOut>;
  template <class C>
  __device__ R operator()(C x) const {
    if constexpr (std::is_same_v<R, bool>) {
      return x != C(0);
    } else if constexpr (std::is_integral_v<R> && !std::is_integral_v<C>) {
      if (isnan(x)) return R(0);
      if (double(x) >= double(::cuda::std::numeric_limits<R>::max())) return ::cuda::std::numeric_limits<R>::max();
      if (double(x) <= double(::cuda::std::numeric_limits<R>::lowest())) return ::cuda::std::numeric_limits<R>::lowest();
      return R(x);
    } else {
      return R(x);
    }
  }
};

// BatchNormalization (inference): x * a + (B - mean * a) with a = scale / sqrt(var + eps),
// the CPU's coefficients, computed per element from the broadcast parameter views.
struct BatchNorm {
  float epsilon;
  __device__ explicit BatchNorm(const MapParams& p) : epsilon(p.scalars[0]) {}
  template <class C>
  __device__ C operator()(C x, C scale, C bias, C mean, C var) const {
    C a = scale / scalar::sqrt(var + C(epsilon));
    return x * a + (bias - mean * a);
  }
};

// A FusedElementwise program, interpreted per element in f32 (fused_math.h holds the
// arithmetic the CPU kernel shares). Registers live in local memory: the program's
// operands are read from the kernel's parameters, the same for every thread, so the
// switch in fused_math::apply never diverges.
// One instruction, chosen at run time: compiled once and called by every interpreter
// kernel (24 of them: 1-8 operands, 3 dtypes), each of which inlined the switch over every
// op at each of its unrolled elements: half of this file's device code, and of its build.
__device__ __noinline__ float interpret_instruction(FusedOp op, float a, float b, float alpha, float beta) {
  return fused_math::apply(op, a, b, alpha, beta);
}

struct Fused {
  const FusedCode& code;
  __device__ explicit Fused(const MapParams& p) : code(p.fused) {}
  template <class... C>
  __device__ float operator()(C... x) const {
    constexpr int kInputs = int(sizeof...(C));
    float r[kMaxFusedInputs + kMaxFusedInstructions];
    int k = 0;
    ((r[k++] = float(x)), ...);
    for (int j = 0; j < code.count; ++j)
      r[kInputs + j] = interpret_instruction(FusedOp(code.op[j]), r[code.a[j]], code.b[j] >= 0 ? r[code.b[j]] : 0.0f,
                                             code.alpha[j], code.beta[j]);
    return r[kInputs + code.count - 1];
  }
};

// The programs that make up nearly every fused group in detectors and gated stacks run as
// compiled functors instead of through the interpreter, which is latency-bound (a switch
// and a local-memory register file per instruction: 33.7 us against 17.5 + 22.0 us for
// the unfused Sigmoid and Mul on [1,64,320,320] f32). Each computes exactly what the
// instructions compute: products and sums rounded separately (no FMA contraction).
enum FusedPattern : uint8_t { kInterpreted, kSilu, kResidualSilu, kGated, kResidualGated, kBiasGeluErf, kBiasGeluTanh, kSiluGate };

__device__ __forceinline__ float sigmoid_f32(float x) { return 1.0f / (1.0f + expf(-x)); }

// Operand i of `v` without indexing an array by a run-time value (registers stay registers).
template <int N>
__device__ __forceinline__ float select_operand(int i, const float (&v)[N]) {
  float r = v[0];
#pragma unroll
  for (int k = 1; k < N; ++k) r = i == k ? v[k] : r;
  return r;
}

// x * sigmoid(x)
struct FusedSilu : NoParams { using NoParams::NoParams;
  __device__ float operator()(float x) const { return __fmul_rn(x, sigmoid_f32(x)); } };

// h + x * sigmoid(x); slot[0] is x's operand.
struct FusedResidualSilu {
  int x;
  __device__ explicit FusedResidualSilu(const MapParams& p) : x(p.fused.slot[0]) {}
  __device__ float operator()(float a, float b) const {
    const float v[2] = {a, b};
    const float s = select_operand(x, v), h = select_operand(1 - x, v);
    return __fadd_rn(h, __fmul_rn(s, sigmoid_f32(s)));
  }
};

// tanh(a) * sigmoid(b) (+ h): slots a, b, h.
template <bool kResidual>
struct FusedGated {
  int a, b, h;
  __device__ explicit FusedGated(const MapParams& p) : a(p.fused.slot[0]), b(p.fused.slot[1]), h(p.fused.slot[2]) {}
  template <class... C>
  __device__ float operator()(C... x) const {
    const float v[sizeof...(C)] = {float(x)...};
    float y = __fmul_rn(tanhf(select_operand(a, v)), sigmoid_f32(select_operand(b, v)));
    if constexpr (kResidual) y = __fadd_rn(y, select_operand(h, v));
    return y;
  }
};

// BERT's GELU after its bias, as torch exports it: with s = x + bias,
// (s * (erf(s / c) + one)) * half, c = sqrt 2, one = 1, half = 0.5 as operands (their
// values are the program's business, so any constants compute right). The instructions'
// own scalar math (fused_math::apply), in the program's order: the interpreter took 60 us
// for BERT's [32 x 128, 1024] bf16 (6% of the H200's memory bandwidth).
// Slots: x, bias, c, one, half.
struct FusedBiasGeluErf {
  int x, bias, c, one, half;
  __device__ explicit FusedBiasGeluErf(const MapParams& p)
      : x(p.fused.slot[0]), bias(p.fused.slot[1]), c(p.fused.slot[2]), one(p.fused.slot[3]), half(p.fused.slot[4]) {}
  template <class... C>
  __device__ float operator()(C... in) const {
    using fused_math::apply;
    const float v[sizeof...(C)] = {float(in)...};
    const float s = apply<FusedOp::kAdd>(select_operand(x, v), select_operand(bias, v), 0, 0);
    const float e = apply<FusedOp::kErf>(apply<FusedOp::kDiv>(s, select_operand(c, v), 0, 0), 0, 0, 0);
    const float m = apply<FusedOp::kMul>(s, apply<FusedOp::kAdd>(e, select_operand(one, v), 0, 0), 0, 0);
    return apply<FusedOp::kMul>(m, select_operand(half, v), 0, 0);
  }
};

// kBiasGeluTanhExpression (launch.h), the tree as written, operand by operand: with
// s = x0 + x1, x5 * (s * (x4 + tanh(x3 * (s + x2 * (s * (s * s)))))). The interpreter took
// 80 us for GPT-2's [4096, 1024] bf16 (4% of the H200's memory bandwidth).
struct FusedBiasGeluTanh : NoParams {
  using NoParams::NoParams;
  template <class... C>
  __device__ float operator()(C... in) const {
    static_assert(sizeof...(C) == 6);
    using fused_math::apply;
    const float x[6] = {float(in)...};
    const float s = apply<FusedOp::kAdd>(x[0], x[1], 0, 0);
    const float cube = apply<FusedOp::kMul>(s, apply<FusedOp::kMul>(s, s, 0, 0), 0, 0);
    const float inner = apply<FusedOp::kAdd>(s, apply<FusedOp::kMul>(x[2], cube, 0, 0), 0, 0);
    const float t = apply<FusedOp::kTanh>(apply<FusedOp::kMul>(x[3], inner, 0, 0), 0, 0, 0);
    const float g = apply<FusedOp::kMul>(s, apply<FusedOp::kAdd>(x[4], t, 0, 0), 0, 0);
    return apply<FusedOp::kMul>(x[5], g, 0, 0);
  }
};

// kSiluGateExpression: (x0 * sigmoid(x0)) * x1, as the interpreter's instructions.
struct FusedSiluGate : NoParams {
  using NoParams::NoParams;
  __device__ float operator()(float gate, float up) const {
    using fused_math::apply;
    const float silu = apply<FusedOp::kMul>(gate, apply<FusedOp::kSigmoid>(gate, 0, 0, 0), 0, 0);
    return apply<FusedOp::kMul>(silu, up, 0, 0);
  }
};

// ---- the map kernel ------------------------------------------------------------------
template <typename T>
struct alignas(4 * sizeof(Bits<T>)) Vec4 {
  Bits<T> v[4];
};

// Elements i..i+3, or element i four times when the operand broadcasts along them.
template <typename T>
__device__ __forceinline__ Vec4<T> load4(const void* base, int64_t i, bool broadcast) {
  const Bits<T>* p = static_cast<const Bits<T>*>(base) + i;
  if (broadcast) {
    Vec4<T> r;
#pragma unroll
    for (int j = 0; j < 4; ++j) r.v[j] = p[0];
    return r;
  }
  return *reinterpret_cast<const Vec4<T>*>(p);
}

// Whether type T is one whose kernels are vectorized and unrolled (the top of this file).
template <typename T>
constexpr bool kHotType = std::is_same_v<T, float> || std::is_same_v<T, __half> ||
                          std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, bool> ||
                          std::is_same_v<T, uint16_t> || std::is_same_v<T, uint32_t>;

template <typename T>
using Loaded = decltype(Operand<T>::load(std::declval<const MapParams&>(), nullptr, 0));

template <int N>
__device__ __forceinline__ void map_offsets(const MapArgs<N>& a, int64_t i, int64_t (&off)[N]) {
  if (a.mode == kModeStrided) {
    strided_offsets(a.ix, a.div, i, off);
  } else {
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] = i * a.ix.strides[k][0];
  }
}

template <class Fn, class TOut, class... TIns>
struct Map {
  static constexpr int N = sizeof...(TIns) + 1;
  static constexpr bool kDynamic = (Operand<TIns>::kDynamic || ...);
  static constexpr bool kVector = !kDynamic && kHotType<TOut> && (kHotType<TIns> && ...);
  // Elements per thread and loop step on the linear and strided paths.
  static constexpr int kUnroll = kVector ? 4 : 1;
  using Args = MapArgs<N>;

  // Elements first, first + step, ... (kUnroll of them, those below the count): every load
  // is issued before the first store, so each thread keeps several requests in flight.
  template <size_t... K>
  __device__ static void some(const Fn& fn, const Args& a, int64_t first, int64_t step, std::index_sequence<K...>) {
    int64_t off[kUnroll][N];
    ::cuda::std::tuple<Loaded<TIns>...> in[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (first + u * step >= a.ix.count) break;
      map_offsets(a, first + u * step, off[u]);
      in[u] = ::cuda::std::tuple<Loaded<TIns>...>(Operand<TIns>::load(a.params, a.data[K + 1], off[u][K + 1])...);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (first + u * step >= a.ix.count) break;
      store<TOut>(a.data[0], off[u][0], fn(::cuda::std::get<K>(in[u])...));
    }
  }
  // The 4 innermost elements from offsets `off` on: contiguous, or broadcast along them.
  template <size_t... K>
  __device__ static void four(const Fn& fn, const Args& a, const int64_t (&off)[N], std::index_sequence<K...>) {
    ::cuda::std::tuple<Vec4<TIns>...> in{
        load4<TIns>(a.data[K + 1], off[K + 1], ((a.inner_broadcast >> (K + 1)) & 1u) != 0)...};
    Vec4<TOut> out;
#pragma unroll
    for (int j = 0; j < 4; ++j) out.v[j] = to_bits<TOut>(fn(to_compute<TIns>(::cuda::std::get<K>(in).v[j])...));
    *reinterpret_cast<Vec4<TOut>*>(static_cast<Bits<TOut>*>(a.data[0]) + off[0]) = out;
  }
};

template <class Fn, class TOut, class... TIns>
__global__ void __launch_bounds__(kThreads) map_kernel(const __grid_constant__ MapArgs<sizeof...(TIns) + 1> a) {
  using M = Map<Fn, TOut, TIns...>;
  const Fn fn(a.params);
  const auto seq = std::index_sequence_for<TIns...>{};
  const int64_t first = global_thread(), step = grid_threads();
  if constexpr (M::kVector) {
    if (a.mode == kModeVector) {
      for (int64_t v = first; v < a.ix.count; v += step) {
        int64_t off[M::N];
        if (a.ix.rank == 1) {
#pragma unroll
          for (int k = 0; k < M::N; ++k) off[k] = v * a.ix.strides[k][0];
        } else {
          strided_offsets(a.ix, a.div, v, off);
        }
        M::four(fn, a, off, seq);
      }
      return;
    }
  }
  for (int64_t i = first; i < a.ix.count; i += step * M::kUnroll) M::some(fn, a, i, step, seq);
}

// Sum, Mean, Min, Max over params.inputs inputs (at most kMaxMapOperands - 1), folded in
// input order in the compute type; Mean scales at the end as the CPU does.
template <class Fn, class T>
__global__ void __launch_bounds__(kThreads) variadic_kernel(const MapArgs<kMaxMapOperands> a) {
  using C = Compute<T>;
  const Fn fn(a.params);
  for (int64_t i = global_thread(); i < a.ix.count; i += grid_threads()) {
    int64_t off[kMaxMapOperands];
    map_offsets(a, i, off);
    C acc = device::load<T>(a.data[1], off[1]);
#pragma unroll
    for (int k = 2; k < kMaxMapOperands; ++k)
      if (k <= a.params.inputs) acc = fn(acc, device::load<T>(a.data[k], off[k]));
    if (a.params.scale != 0) acc = C(double(acc) * a.params.scale);
    store<T>(a.data[0], off[0], acc);
  }
}

// ---- host side -----------------------------------------------------------------------
template <int N>
MapArgs<N> args_of(const MapLaunch& l) {
  MapArgs<N> a;
  a.mode = l.mode;
  a.inner_broadcast = l.inner_broadcast;
  a.ix.rank = l.ix.rank;
  a.ix.count = l.ix.count;
  for (int d = 0; d < kMaxDims; ++d) {
    a.div[d] = l.div[d];
    a.ix.sizes[d] = l.ix.sizes[d];
    for (int k = 0; k < N; ++k) a.ix.strides[k][d] = l.ix.strides[k][d];
  }
  for (int k = 0; k < N; ++k) a.data[k] = l.data[k];
  a.params = l.params;
  return a;
}

template <class Fn, class TOut, class... TIns>
cudaError_t launch_map(const MapLaunch& l, cudaStream_t stream) {
  constexpr int kUnroll = Map<Fn, TOut, TIns...>::kUnroll;
  int64_t work = l.mode == kModeVector ? l.ix.count : (l.ix.count + kUnroll - 1) / kUnroll;
  map_kernel<Fn, TOut, TIns...><<<grid_for(work, kThreads), kThreads, 0, stream>>>(args_of<sizeof...(TIns) + 1>(l));
  return cudaGetLastError();
}

// A map kernel's launcher and whether it has the vector mode.
struct MapKernelRef {
  MapLaunch::Launcher launch;
  bool vectorizes;
};
template <class Fn, class TOut, class... TIns>
constexpr MapKernelRef kMap{&launch_map<Fn, TOut, TIns...>, Map<Fn, TOut, TIns...>::kVector};

template <class Fn, class T>
cudaError_t launch_variadic(const MapLaunch& l, cudaStream_t stream) {
  variadic_kernel<Fn, T><<<grid_for(l.ix.count, kThreads), kThreads, 0, stream>>>(args_of<kMaxMapOperands>(l));
  return cudaGetLastError();
}

template <typename T> struct Type { using type = T; };

Status use(MapLaunch* l, MapKernelRef kernel) {
  l->launcher = kernel.launch;
  l->vectorizes = kernel.vectorizes;
  return Status::ok();
}
Status use_variadic(MapLaunch* l, MapLaunch::Launcher launcher) {
  l->launcher = launcher;
  l->vectorizes = false;
  return Status::ok();
}

Status no_kernel(DType dtype) { return unsupported("no CUDA kernel for " + std::string(dtype_name(dtype))); }

// Calls f(Type<T>{}) for the storage type T of `dtype` among the float / numeric / all types.
template <class F> Status float_types(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kF32: return f(Type<float>{});
    case DType::kF16: return f(Type<__half>{});
    case DType::kBF16: return f(Type<__nv_bfloat16>{});
    case DType::kF64: return f(Type<double>{});
    default: return no_kernel(dtype);
  }
}
template <class F> Status integer_types(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kI64: return f(Type<int64_t>{});
    case DType::kI32: return f(Type<int32_t>{});
    case DType::kI8: return f(Type<int8_t>{});
    case DType::kU8: return f(Type<uint8_t>{});
    default: return no_kernel(dtype);
  }
}
template <class F> Status numeric_types(DType dtype, F&& f) {
  return is_integral(dtype) ? integer_types(dtype, f) : float_types(dtype, f);
}
template <class F> Status all_types(DType dtype, F&& f) {
  if (dtype == DType::kBool) return f(Type<bool>{});
  return numeric_types(dtype, f);
}
// Raw words of each element size (Where).
template <class F> Status word_types(DType dtype, F&& f) {
  switch (dtype_size(dtype)) {
    case 1: return f(Type<uint8_t>{});
    case 2: return f(Type<uint16_t>{});
    case 4: return f(Type<uint32_t>{});
    default: return f(Type<uint64_t>{});
  }
}

#define STRIDER_PICK(dispatch, dtype, ...)                                      \
  dispatch(dtype, [&](auto tag) {                                               \
    using T = typename decltype(tag)::type;                                     \
    return use(l, __VA_ARGS__);                                                 \
  })

template <class Fn> Status unary_float(DType t, MapLaunch* l) { return STRIDER_PICK(float_types, t, kMap<Fn, T, T>); }
template <class Fn> Status unary_numeric(DType t, MapLaunch* l) { return STRIDER_PICK(numeric_types, t, kMap<Fn, T, T>); }
template <class Fn> Status binary_numeric(DType t, MapLaunch* l) { return STRIDER_PICK(numeric_types, t, kMap<Fn, T, T, T>); }
template <class Fn> Status compare(DType t, MapLaunch* l) { return STRIDER_PICK(numeric_types, t, kMap<Fn, bool, T, T>); }
template <class Fn> Status variadic(DType t, MapLaunch* l) {
  return numeric_types(t, [&](auto tag) { return use_variadic(l, &launch_variadic<Fn, typename decltype(tag)::type>); });
}

// kMap<Fused, T, T x inputs>: one instantiation per operand count and float type.
template <class T, size_t> using Same = T;
template <class T, size_t... I>
constexpr MapKernelRef fused_launcher(std::index_sequence<I...>) {
  return kMap<Fused, T, Same<T, I>...>;
}
template <class T, size_t... N>
Status pick_fused_arity(size_t inputs, MapLaunch* l, std::index_sequence<N...>) {
  static constexpr MapKernelRef kByArity[] = {fused_launcher<T>(std::make_index_sequence<N + 1>{})...};
  if (inputs < 1 || inputs > sizeof...(N)) return unsupported("fused program with " + std::to_string(inputs) + " inputs");
  return use(l, kByArity[inputs - 1]);
}
bool is_op(const FusedCode& c, int j, FusedOp op) { return FusedOp(c.op[j]) == op; }
// Instruction j reads registers r1 and r2, in either order.
bool reads(const FusedCode& c, int j, int r1, int r2) {
  return (c.a[j] == r1 && c.b[j] == r2) || (c.a[j] == r2 && c.b[j] == r1);
}

bool match_gated(FusedCode& c, int n) {
  if (!((n == 2 && c.count == 3) || (n == 3 && c.count == 4))) return false;
  int tanh_at = is_op(c, 0, FusedOp::kTanh) ? 0 : 1;
  if (!is_op(c, tanh_at, FusedOp::kTanh) || !is_op(c, 1 - tanh_at, FusedOp::kSigmoid)) return false;
  int a = c.a[tanh_at], b = c.a[1 - tanh_at], h = 3 - a - b;
  if (a == b || a >= n || b >= n || !is_op(c, 2, FusedOp::kMul) || !reads(c, 2, n, n + 1)) return false;
  if (c.count == 4 && (!is_op(c, 3, FusedOp::kAdd) || !reads(c, 3, n + 2, h) || h == a || h == b)) return false;
  c.slot[0] = int8_t(a);
  c.slot[1] = int8_t(b);
  c.slot[2] = int8_t(h);
  return true;
}

// FusedBiasGeluErf's program: Add(x, bias), Div(., c), Erf, Add(., one), Mul(s, .),
// Mul(., half), each input read once (Add and Mul in either operand order: IEEE sums
// and products commute).
bool match_bias_gelu_erf(FusedCode& c, int n) {
  constexpr FusedOp kOps[] = {FusedOp::kAdd, FusedOp::kDiv, FusedOp::kErf, FusedOp::kAdd, FusedOp::kMul, FusedOp::kMul};
  if (n != 5 || c.count != 6) return false;
  for (int j = 0; j < 6; ++j)
    if (!is_op(c, j, kOps[j])) return false;
  const auto other = [&](int j, int reg) { return c.a[j] == reg ? c.b[j] : c.b[j] == reg ? c.a[j] : -1; };
  const int x = c.a[0], bias = c.b[0], divisor = c.b[1], one = other(3, n + 2), half = other(5, n + 4);
  if (c.a[1] != n || c.a[2] != n + 1 || !reads(c, 4, n, n + 3)) return false;
  const int used[5] = {x, bias, divisor, one, half};
  for (int i = 0; i < 5; ++i) {
    if (used[i] < 0 || used[i] >= n) return false;
    for (int k = 0; k < i; ++k)
      if (used[k] == used[i]) return false;
    c.slot[i] = int8_t(used[i]);
  }
  return true;
}

// Which compiled form runs the program of `n` inputs; fills its slots.
FusedPattern match_pattern(FusedCode& c, int n) {
  if (n == 1 && c.count == 2 && is_op(c, 0, FusedOp::kSigmoid) && c.a[0] == 0 && is_op(c, 1, FusedOp::kMul) &&
      reads(c, 1, 0, 1))
    return kSilu;
  if (n == 2 && c.count == 3 && is_op(c, 0, FusedOp::kSigmoid) && c.a[0] < 2 && is_op(c, 1, FusedOp::kMul) &&
      reads(c, 1, c.a[0], 2) && is_op(c, 2, FusedOp::kAdd) && reads(c, 2, 3, 1 - c.a[0])) {
    c.slot[0] = c.a[0];
    return kResidualSilu;
  }
  if (match_gated(c, n)) return c.count == 4 ? kResidualGated : kGated;
  if (match_bias_gelu_erf(c, n)) return kBiasGeluErf;
  return kInterpreted;
}

template <class T>
Status pick_fused_typed(size_t inputs, MapLaunch* l) {
  FusedCode& code = l->params.fused;
  // A form matched by the expression text (launch.h) first, then the wiring matchers.
  if (code.form == FusedForm::kBiasGeluTanh && inputs == 6) code.pattern = kBiasGeluTanh;
  else if (code.form == FusedForm::kSiluGate && inputs == 2) code.pattern = kSiluGate;
  else code.pattern = match_pattern(code, int(inputs));
  switch (code.pattern) {
    case kSilu: return use(l, kMap<FusedSilu, T, T>);
    case kResidualSilu: return use(l, kMap<FusedResidualSilu, T, T, T>);
    case kGated: return use(l, kMap<FusedGated<false>, T, T, T>);
    case kResidualGated: return use(l, kMap<FusedGated<true>, T, T, T, T>);
    case kBiasGeluErf: return use(l, kMap<FusedBiasGeluErf, T, T, T, T, T, T>);
    case kBiasGeluTanh: return use(l, kMap<FusedBiasGeluTanh, T, T, T, T, T, T, T>);
    case kSiluGate: return use(l, kMap<FusedSiluGate, T, T, T>);
    default: return pick_fused_arity<T>(inputs, l, std::make_index_sequence<size_t(kMaxFusedInputs)>{});
  }
}

Status pick_fused(const MapSpec& s, MapLaunch* l) {
  for (const TensorView& in : s.inputs)
    if (in.dtype != s.out.dtype) return no_kernel(in.dtype);
  switch (s.out.dtype) {
    case DType::kF32: return pick_fused_typed<float>(s.inputs.size(), l);
    case DType::kBF16: return pick_fused_typed<__nv_bfloat16>(s.inputs.size(), l);
    case DType::kF16: return pick_fused_typed<__half>(s.inputs.size(), l);
    default: return no_kernel(s.out.dtype);
  }
}

Status pick_cast(const MapSpec& s, MapLaunch* l) {
  bool float_source = is_floating(s.inputs[0].dtype);
  return all_types(s.out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return use(l, float_source ? kMap<CastTo<T>, T, AnyAsDouble> : kMap<CastTo<T>, T, AnyAsInt>);
  });
}

Status pick_pow(const MapSpec& s, MapLaunch* l) {
  DType base = s.inputs[0].dtype;
  if (base == DType::kI8 || base == DType::kU8 || s.inputs[1].dtype == DType::kBool) return no_kernel(base);
  return STRIDER_PICK(numeric_types, base, kMap<Pow<T>, T, T, AnyAsDouble>);
}

// The launcher of a table row for input dtype t, over the dtypes of the row's kind.
template <ElementwiseOp kOp>
Status table_launcher(DType t, MapLaunch* l) {
  using Traits = ElementwiseTraits<kOp>;
  using Fn = FromTable<typename Traits::Fn>;
  constexpr ElementwiseKind kKind = Traits::kKind;
  if constexpr (Traits::kKernel == ElementwiseKernel::kOwn) return no_kernel(t);
  else if constexpr (kKind == ElementwiseKind::kFloatUnary) return unary_float<Fn>(t, l);
  else if constexpr (kKind == ElementwiseKind::kNumericUnary) return unary_numeric<Fn>(t, l);
  else if constexpr (kKind == ElementwiseKind::kNumericBinary) return binary_numeric<Fn>(t, l);
  else if constexpr (kKind == ElementwiseKind::kCompare)
    return t == DType::kBool ? use(l, kMap<Fn, bool, bool, bool>) : compare<Fn>(t, l);
  else if constexpr (kKind == ElementwiseKind::kLogicUnary) return use(l, kMap<Fn, bool, bool>);
  else if constexpr (kKind == ElementwiseKind::kLogicBinary) return use(l, kMap<Fn, bool, bool, bool>);
  else if constexpr (kKind == ElementwiseKind::kIntegerUnary) return STRIDER_PICK(integer_types, t, kMap<Fn, T, T>);
  else if constexpr (kKind == ElementwiseKind::kIntegerBinary) return STRIDER_PICK(integer_types, t, kMap<Fn, T, T, T>);
  else return STRIDER_PICK(float_types, t, kMap<Fn, bool, T>);
}

Status select_table_launcher(ElementwiseOp op, DType t, MapLaunch* l) {
  switch (op) {
#define STRIDER_TABLE_CASE(name, kind, kernel, params) \
  case ElementwiseOp::k##name: return table_launcher<ElementwiseOp::k##name>(t, l);
    STRIDER_ELEMENTWISE_OPS(STRIDER_TABLE_CASE)
#undef STRIDER_TABLE_CASE
  }
  return no_kernel(t);
}

Status select_launcher(const MapSpec& s, MapLaunch* l) {
  const DType t = s.inputs[0].dtype;
  switch (s.op) {
    case MapOp::kElementwise: return select_table_launcher(s.params.elementwise, t, l);
    case MapOp::kWhere: return STRIDER_PICK(word_types, s.out.dtype, kMap<Select, T, bool, T, T>);
    case MapOp::kClip: return STRIDER_PICK(numeric_types, t, kMap<Clip<T>, T, T>);
    case MapOp::kPow: return pick_pow(s, l);
    case MapOp::kCast: return pick_cast(s, l);
    case MapOp::kBatchNorm: return STRIDER_PICK(float_types, t, kMap<BatchNorm, T, T, T, T, T, T>);
    case MapOp::kSum:
    case MapOp::kMean: return variadic<FromTable<elementwise::Add>>(t, l);
    case MapOp::kMin: return variadic<FromTable<elementwise::Min>>(t, l);
    case MapOp::kMax: return variadic<FromTable<elementwise::Max>>(t, l);
    case MapOp::kFused: return pick_fused(s, l);
  }
  return no_kernel(t);
}
#undef STRIDER_PICK

// Vector mode (see the top of this file): turns `l->ix` into the index space of groups of
// 4 innermost elements. Otherwise linear (one dim) or strided.
int choose_mode(const MapSpec& s, MapLaunch* l) {
  StridedIndexer<kMaxMapOperands>& ix = l->ix;
  const int inner = ix.rank - 1;
  bool vector = l->vectorizes && ix.rank >= 1 && ix.sizes[inner] % 4 == 0;
  uint32_t broadcast = 0;
  for (size_t k = 0; k <= s.inputs.size() && vector; ++k) {
    const int64_t stride = ix.strides[k][inner];
    const int64_t vector_bytes = 4 * dtype_size(k == 0 ? s.out.dtype : s.inputs[k - 1].dtype);
    if (stride == 0 && k > 0) {
      broadcast |= 1u << k;
      continue;
    }
    vector = stride == 1 && reinterpret_cast<uintptr_t>(l->data[k]) % uintptr_t(vector_bytes) == 0;
    for (int d = 0; d < inner && vector; ++d) vector = ix.strides[k][d] % 4 == 0;
  }
  if (!vector) return ix.rank > 1 ? kModeStrided : kModeLinear;
  ix.sizes[inner] /= 4;
  ix.count /= 4;
  for (int k = 0; k < kMaxMapOperands; ++k) ix.strides[k][inner] *= 4;
  l->inner_broadcast = broadcast;
  return kModeVector;
}

}  // namespace

Status prepare_map(const MapSpec& s, MapLaunch* l) {
  if (s.inputs.empty() || s.inputs.size() + 1 > size_t(kMaxMapOperands))
    return internal_error("elementwise launch with " + std::to_string(s.inputs.size()) + " inputs");
  std::vector<Strides> strides{s.out.strides};
  for (const TensorView& in : s.inputs) {
    if (in.sizes != s.out.sizes)
      return internal_error("elementwise input " + in.to_string() + " is not broadcast to " + s.out.to_string());
    strides.push_back(in.strides);
  }
  while (strides.size() < size_t(kMaxMapOperands)) strides.push_back(Strides(s.out.sizes.size(), 0));
  Shape sizes = s.out.sizes;
  order_dims_by(s.out.strides, sizes, strides);
  *l = MapLaunch{};
  STRIDER_RETURN_IF_ERROR(make_indexer<kMaxMapOperands>(sizes, strides, &l->ix));
  l->data[0] = device_data<std::byte>(s.out);
  for (size_t k = 0; k < s.inputs.size(); ++k) l->data[k + 1] = device_data<std::byte>(s.inputs[k]);
  l->params = s.params;
  l->params.inputs = int(s.inputs.size());
  STRIDER_RETURN_IF_ERROR(select_launcher(s, l));
  l->mode = choose_mode(s, l);
  make_fast_divisors(l->ix, l->div);
  return Status::ok();
}

Status run_map(const MapLaunch& l, cudaStream_t stream) {
  if (l.ix.count == 0) return Status::ok();
  cudaError_t error = l.launcher(l, stream);
  if (error == cudaSuccess) return Status::ok();
  return device_error(std::string("elementwise kernel launch failed: ") + cudaGetErrorString(error));
}

}  // namespace strider::cuda
