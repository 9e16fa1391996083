// Elementwise CUDA kernels: out = fn(in...) over views of any strides, as the CPU's
// MapKernel computes them (same functors, same compute types: f32 for f32/f16/bf16, f64
// for f64, the type itself for integers; bool is one byte 0/1).
//
// One kernel template serves every op; each instantiation (op functor x dtypes) is made
// only for the dtype combinations the op supports, listed in select_launcher. Elements
// are addressed in one of four ways, chosen when the launch is prepared:
//  - rows (the compiled fused forms only: fused_forms.cuh): two collapsed dims, every
//    operand dense along the inner one or broadcast along it; see map_rows;
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

#include "hal/cuda/dependent_launch.cuh"
#include "hal/cuda/fused_forms.cuh"
#include "hal/cuda/launch.h"

namespace strider::cuda {
namespace {

using namespace device;

enum : int { kModeVector = 0, kModeLinear = 1, kModeStrided = 2, kModeRows = 3 };

template <int N>
struct MapArgs {
  int mode;
  uint32_t inner_broadcast;  // vector and row modes: bit k set when operand k broadcasts along the innermost dim
  StridedIndexer<N> ix;      // vector mode: over groups of 4 innermost elements; row mode: rows x chunks
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
  device::order_after_producers();
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

// ---- the row kernel (compiled fused forms) ----------------------------------------------
// Row mode: the index space is rows x columns, each operand dense along the columns (or
// one value per row) with any row stride; a thread takes one 16-byte chunk of columns and
// walks rows with it. An operand the same on every row (a bias row, a scalar) is read once
// per thread, and no element's offset needs more than a multiply-add: the vector mode's
// per-element indexing and broadcast loads made BERT's bias + GELU over [4096, 1024] bf16
// run at about 500 GB/s.
template <typename T>
inline constexpr int kRowChunk = int(16 / sizeof(Bits<T>));
template <typename T>
struct alignas(16) Chunk {
  Bits<T> v[kRowChunk<T>];
};

// Operand k's chunk `chunk` of row `row`, or its row's one value in every lane.
template <typename T, int N>
__device__ __forceinline__ Chunk<T> load_chunk(const MapArgs<N>& a, int k, int64_t row, uint32_t chunk) {
  const Bits<T>* p = static_cast<const Bits<T>*>(a.data[k]) + row * a.ix.strides[k][0] + chunk * a.ix.strides[k][1];
  if ((a.inner_broadcast >> k) & 1u) {
    Chunk<T> r;
#pragma unroll
    for (int j = 0; j < kRowChunk<T>; ++j) r.v[j] = p[0];
    return r;
  }
  return *reinterpret_cast<const Chunk<T>*>(p);
}

// ix.sizes = {rows, chunks}; strides[k] = {row stride, chunk stride (kRowChunk or 0)}.
// Thread g takes chunk g % chunks of rows g / chunks, + lanes, + 2 lanes, ...
template <class Fn, class T, size_t... K>
__device__ __forceinline__ void map_rows(const MapArgs<sizeof...(K) + 1>& a, std::index_sequence<K...>) {
  const Fn fn(a.params);
  const uint32_t chunks = uint32_t(a.ix.sizes[1]);
  const uint32_t g = blockIdx.x * blockDim.x + threadIdx.x;
  const uint32_t lanes = gridDim.x * blockDim.x / chunks, first_row = fast_divide(g, a.div[1]);
  if (first_row >= lanes) return;
  const uint32_t chunk = g - first_row * chunks;
  Chunk<T> in[sizeof...(K)];
  ((a.ix.strides[K + 1][0] == 0 ? void(in[K] = load_chunk<T>(a, int(K) + 1, 0, chunk)) : void()), ...);
  for (int64_t row = first_row; row < a.ix.sizes[0]; row += lanes) {
    ((a.ix.strides[K + 1][0] != 0 ? void(in[K] = load_chunk<T>(a, int(K) + 1, row, chunk)) : void()), ...);
    Chunk<T> out;
#pragma unroll
    for (int j = 0; j < kRowChunk<T>; ++j) out.v[j] = to_bits<T>(fn(to_compute<T>(in[K].v[j])...));
    *reinterpret_cast<Chunk<T>*>(static_cast<Bits<T>*>(a.data[0]) + row * a.ix.strides[0][0] +
                                 chunk * a.ix.strides[0][1]) = out;
  }
}

// At most 64 registers (four blocks an SM): bf16's GELU took 67, three blocks.
template <class Fn, class T, int kInputs>
__global__ void __launch_bounds__(kThreads, 4) row_kernel(const __grid_constant__ MapArgs<kInputs + 1> a) {
  device::order_after_producers();
  map_rows<Fn, T>(a, std::make_index_sequence<kInputs>{});
}

// Sum, Mean, Min, Max over params.inputs inputs (at most kMaxMapOperands - 1), folded in
// input order in the compute type; Mean scales at the end as the CPU does.
template <class Fn, class T>
__global__ void __launch_bounds__(kThreads) variadic_kernel(const MapArgs<kMaxMapOperands> a) {
  device::order_after_producers();
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
  launch_dependent(map_kernel<Fn, TOut, TIns...>, grid_for(work, kThreads), kThreads, 0, stream,
                   args_of<sizeof...(TIns) + 1>(l));
  return cudaGetLastError();
}

// A map kernel's launcher and whether it has the vector mode.
// Row mode's grid: enough 256-thread blocks to fill an H200 (132 SMs x 8) twice; bigger
// maps loop over rows, reading their row-invariant operands once per thread.
inline constexpr int64_t kRowBlocks = 2 * 132 * 8;

template <class Fn, class T, int kInputs>
cudaError_t launch_rows(const MapLaunch& l, cudaStream_t stream) {
  const unsigned blocks = unsigned(std::min<int64_t>(kRowBlocks, (l.ix.count + kThreads - 1) / kThreads));
  launch_dependent(row_kernel<Fn, T, kInputs>, blocks, kThreads, 0, stream, args_of<kInputs + 1>(l));
  return cudaGetLastError();
}

// A map kernel's launcher, whether it has the vector mode, and its row mode's launcher.
struct MapKernelRef {
  MapLaunch::Launcher launch;
  bool vectorizes;
  MapLaunch::Launcher rows = nullptr;
};
template <class Fn, class TOut, class... TIns>
constexpr MapKernelRef kMap{&launch_map<Fn, TOut, TIns...>, Map<Fn, TOut, TIns...>::kVector};
// A compiled fused form over kInputs operands of type T: the map kernel and the row kernel.
template <class T, size_t> using Same = T;
template <class Fn, class T, size_t... I>
constexpr MapKernelRef compiled_kernels(std::index_sequence<I...>) {
  return {&launch_map<Fn, T, Same<T, I>...>, Map<Fn, T, Same<T, I>...>::kVector, &launch_rows<Fn, T, int(sizeof...(I))>};
}
template <class Fn, class T, int kInputs>
constexpr MapKernelRef kCompiled = compiled_kernels<Fn, T>(std::make_index_sequence<size_t(kInputs)>{});

template <class Fn, class T>
cudaError_t launch_variadic(const MapLaunch& l, cudaStream_t stream) {
  launch_dependent(variadic_kernel<Fn, T>, grid_for(l.ix.count, kThreads), kThreads, 0, stream,
                   args_of<kMaxMapOperands>(l));
  return cudaGetLastError();
}

template <typename T> struct Type { using type = T; };

Status use(MapLaunch* l, MapKernelRef kernel) {
  l->launcher = kernel.launch;
  l->vectorizes = kernel.vectorizes;
  l->row_launcher = kernel.rows;
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
template <class T>
Status pick_fused_typed(size_t inputs, MapLaunch* l) {
  using namespace fused_forms;
  FusedCode& code = l->params.fused;
  code.pattern = match_pattern(code, int(inputs));
  if (code.pattern != kInterpreted) order_inputs_by_slot(l, int(inputs));
  switch (code.pattern) {
    case kSilu: return use(l, kCompiled<Silu, T, 1>);
    case kResidualSilu: return use(l, kCompiled<ResidualSilu, T, 2>);
    case kGated: return use(l, kCompiled<Gated<false>, T, 2>);
    case kResidualGated: return use(l, kCompiled<Gated<true>, T, 3>);
    case kBiasGeluErf: return use(l, kCompiled<BiasGeluErf, T, 5>);
    case kBiasGeluTanh: return use(l, kCompiled<BiasGeluTanh, T, 6>);
    case kSiluGate: return use(l, kCompiled<SiluGate, T, 2>);
    case kMulAdd: return use(l, kCompiled<MulAdd, T, 4>);
    case kMulSub: return use(l, kCompiled<MulSub, T, 4>);
    case kAddThree: return use(l, kCompiled<AddThree, T, 3>);
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

// Whether every operand can be read `width` innermost elements at a time: dense along the
// innermost dim, with every other stride and its address a multiple of `width` elements,
// or (an input) broadcast along it, which sets its bit in *broadcast.
bool in_groups_of(const MapSpec& s, const MapLaunch& l, int64_t width, uint32_t* broadcast) {
  const StridedIndexer<kMaxMapOperands>& ix = l.ix;
  const int inner = ix.rank - 1;
  if (ix.rank < 1 || ix.sizes[inner] % width != 0) return false;
  *broadcast = 0;
  for (size_t k = 0; k <= s.inputs.size(); ++k) {
    const int64_t stride = ix.strides[k][inner];
    if (stride == 0 && k > 0) {
      *broadcast |= 1u << k;
      continue;
    }
    const int64_t group_bytes = width * dtype_size(k == 0 ? s.out.dtype : s.inputs[k - 1].dtype);
    if (stride != 1 || reinterpret_cast<uintptr_t>(l.data[k]) % uintptr_t(group_bytes) != 0) return false;
    for (int d = 0; d < inner; ++d)
      if (ix.strides[k][d] % width != 0) return false;
  }
  return true;
}

// Makes `l->ix` the index space of groups of `width` innermost elements.
void group_innermost(MapLaunch* l, int64_t width, uint32_t broadcast) {
  StridedIndexer<kMaxMapOperands>& ix = l->ix;
  ix.sizes[ix.rank - 1] /= width;
  ix.count /= width;
  for (int k = 0; k < kMaxMapOperands; ++k) ix.strides[k][ix.rank - 1] *= width;
  l->inner_broadcast = broadcast;
}

// Row mode (a compiled form over rows x columns, 16-byte chunks), else vector mode (see
// the top of this file), else linear (one dim) or strided.
int choose_mode(const MapSpec& s, MapLaunch* l) {
  uint32_t broadcast = 0;
  const int64_t chunk = 16 / dtype_size(s.out.dtype);
  if (l->row_launcher && l->ix.rank == 2 && in_groups_of(s, *l, chunk, &broadcast) &&
      l->ix.sizes[1] / chunk <= kRowBlocks * kThreads) {
    group_innermost(l, chunk, broadcast);
    l->launcher = l->row_launcher;
    return kModeRows;
  }
  if (l->vectorizes && in_groups_of(s, *l, 4, &broadcast)) {
    group_innermost(l, 4, broadcast);
    return kModeVector;
  }
  return l->ix.rank > 1 ? kModeStrided : kModeLinear;
}

}  // namespace

Status prepare_map(const MapSpec& s, MapLaunch* l) {
  if (s.inputs.empty() || s.inputs.size() + 1 > size_t(kMaxMapOperands))
    return internal_error("elementwise launch with " + std::to_string(s.inputs.size()) + " inputs");
  *l = MapLaunch{};
  STRIDER_RETURN_IF_ERROR(make_map_indexer<kMaxMapOperands>(s, &l->ix, l->data));
  l->params = s.params;
  l->params.inputs = int(s.inputs.size());
  STRIDER_RETURN_IF_ERROR(select_launcher(s, l));
  l->mode = choose_mode(s, l);
  make_fast_divisors(l->ix, l->div);
  return Status::ok();
}

const char* map_mode_name(const MapLaunch& l) {
  constexpr const char* kNames[] = {"vector", "linear", "strided", "rows"};
  return l.mode >= 0 && l.mode < 4 ? kNames[l.mode] : "?";
}

Status run_map(const MapLaunch& l, cudaStream_t stream) {
  if (l.ix.count == 0) return Status::ok();
  cudaError_t error = l.launcher(l, stream);
  if (error == cudaSuccess) return Status::ok();
  return device_error(std::string("elementwise kernel launch failed: ") + cudaGetErrorString(error));
}

}  // namespace strider::cuda
