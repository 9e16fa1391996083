// Launch functions of strider's own CUDA kernels: elementwise.cu, reduce.cu, pool.cu and
// resize.cu. A kernel class (*_kernels.cc) prepares its launch once, when it is created:
// prepare_* picks the compiled instantiation for the operands' dtypes (UNSUPPORTED when
// there is none) and builds the indexing from the views, so run() only enqueues the
// prepared launch on the queue's stream. Launches never synchronize.
//
// This header is compiled by nvcc as well as by the host compiler, so it includes nothing
// that includes fmt. Below the launch declarations, a section seen only by nvcc holds the
// device helpers the .cu files share (storage types, strided offsets).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "hal/cuda/indexer.h"
#include "memory/tensor_view.h"
#include "ops/elementwise_math.h"
#include "ops/reduce_math.h"
#include "strider/dtype.h"
#include "strider/status.h"

namespace strider::cuda {

// Division by a divisor fixed at launch preparation as a multiply-high, an add and a
// shift (valid for dividends below 2^31): kernels split linear indices into coordinates
// with these, since the GPU has no fast integer divide.
struct FastDivisor {
  uint32_t divisor = 1;
  uint32_t magic = 1;
  uint32_t shift = 0;
};

inline FastDivisor make_fast_divisor(int64_t divisor) {
  FastDivisor f;
  f.divisor = uint32_t(divisor < 1 ? 1 : divisor);
  while (f.shift < 31 && (uint64_t(1) << f.shift) < f.divisor) ++f.shift;
  f.magic = uint32_t(((uint64_t(1) << 32) * ((uint64_t(1) << f.shift) - f.divisor)) / f.divisor + 1);
  return f;
}

// Divisors for the dims of an indexer (used when its count is below 2^31).
template <int N>
void make_fast_divisors(const StridedIndexer<N>& ix, FastDivisor (&out)[kMaxDims]) {
  for (int d = 0; d < kMaxDims; ++d) out[d] = make_fast_divisor(d < ix.rank ? ix.sizes[d] : 1);
}

// Reorders the dims of an index space shared by several operands so that `key`'s
// strides decrease (by magnitude; size-1 dims first): kernels then number elements in
// the key operand's memory order, so neighbouring threads touch neighbouring addresses.
// Only for kernels whose elements are independent of the order they are visited in.
inline void order_dims_by(const Strides& key, Shape& sizes, std::vector<Strides>& strides) {
  std::vector<size_t> order(sizes.size());
  for (size_t d = 0; d < order.size(); ++d) order[d] = d;
  auto magnitude = [&](size_t d) { return key[d] < 0 ? -key[d] : key[d]; };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if ((sizes[a] == 1) != (sizes[b] == 1)) return sizes[a] == 1;
    return magnitude(a) > magnitude(b);
  });
  Shape sorted_sizes;
  for (size_t d : order) sorted_sizes.push_back(sizes[d]);
  for (Strides& s : strides) {
    Strides sorted;
    for (size_t d : order) sorted.push_back(s[d]);
    s = std::move(sorted);
  }
  sizes = std::move(sorted_sizes);
}

// ---- the own convolutions' epilogue (depthwise_conv.cu, direct_conv.cu) ---------------

// The activations strider's own convolutions apply to each result before they store it: a
// FusedConv's program of one of these forms (hal/cuda/epilogue.h, conv_epilogue_of). Any
// other program runs as a map after the kernel. A fixed list, not the interpreter: its
// switch over every op, inlined into each conv kernel, took their compile from 6 to 50 s.
enum class ConvActivation : uint8_t { kNone, kRelu, kClip, kSigmoid, kTanh, kSilu, kGeluErf, kGeluTanh };
struct ConvEpilogue {
  ConvActivation activation = ConvActivation::kNone;
  float low = 0, high = 0;  // kClip's bounds
  // The GELUs' constants, as the programs hold them (fused_forms.cuh's BiasGeluErf and
  // BiasGeluTanh, x the biased value): kGeluErf (x * (erf(x / k0) + k1)) * k2;
  // kGeluTanh k3 * (x * (k2 + tanh(k1 * (x + k0 * (x * (x * x)))))). Only strider's
  // tensor-core product (mma_matmul.h) takes them; no library is given one.
  float k[4] = {};
};

// ---- elementwise.cu ------------------------------------------------------------------

enum class MapOp : uint8_t {
  kElementwise,  // a row of the table in ops/elementwise_math.h (params.elementwise)
  kWhere,      // (bool, T, T) -> T, any T
  kClip,       // bounds from `bounds` (device scalars of T) or the defaults in scalars
  kPow,        // base f32 f16 bf16 f64 i64 i32; exponent any numeric dtype
  kCast,       // any pair of dtypes (equal dtypes are a copy, not a map)
  kBatchNorm,  // (x, scale, B, mean, var) with scalars[0] = epsilon
  kSum, kMean, kMin, kMax,  // variadic: up to kMaxMapOperands - 1 inputs per launch
  kFused,      // a FusedElementwise program (params.fused) over f32, bf16 or f16 operands
};

// The output and up to 8 inputs (a variadic op's first 8).
inline constexpr int kMaxMapOperands = 9;

// A FusedElementwise program (ops/fused_elementwise.h) as kernel parameters: registers
// 0 .. inputs-1 are the operands, inputs + j instruction j's result.
// Compiled forms picked by a program's whole expression (describe_fused_program's text,
// which fixes every op, operand and operand order), for programs the slot matchers of
// elementwise.cu do not describe. The functor evaluates that very tree.
enum class FusedForm : uint8_t { kNone, kBiasGeluTanh, kSiluGate, kMulAdd, kMulSub, kAddThree };
// GPT-2's tanh GELU after its bias, as torch 1.13 exports F.gelu(approximate="tanh").
inline constexpr const char* kBiasGeluTanhExpression =
    "Mul(x5, Mul(Add(x0, x1), Add(x4, Tanh(Mul(x3, Add(Add(x0, x1), Mul(x2, Mul(Add(x0, x1), Mul(Add(x0, x1), "
    "Add(x0, x1))))))))))";
// Llama's gated FFN: SiLU(gate) * up.
inline constexpr const char* kSiluGateExpression = "Mul(Mul(x0, Sigmoid(x0)), x1)";
// Llama's rotary embedding: x * cos + rotate_half(x) * sin, or each half of it
// (passes/split_rotary.h: x2 * cos2 + x1 * sin2 and x1 * cos1 - x2 * sin1).
inline constexpr const char* kMulAddExpression = "Add(Mul(x0, x1), Mul(x2, x3))";
inline constexpr const char* kMulSubExpression = "Sub(Mul(x0, x1), Mul(x2, x3))";
// BERT's embeddings summed: tokens + positions + segments (the interpreter ran BERT b32's
// [4096 x 256] bf16 at 464 GB/s, 0.0137 ms alone).
inline constexpr const char* kAddThreeExpression = "Add(Add(x0, x1), x2)";
struct FusedFormText {
  FusedForm form;
  const char* expression;
};
inline constexpr FusedFormText kFusedFormTexts[] = {{FusedForm::kBiasGeluTanh, kBiasGeluTanhExpression},
                                                    {FusedForm::kSiluGate, kSiluGateExpression},
                                                    {FusedForm::kMulAdd, kMulAddExpression},
                                                    {FusedForm::kMulSub, kMulSubExpression},
                                                    {FusedForm::kAddThree, kAddThreeExpression}};

struct FusedCode {
  int count = 0;
  FusedForm form = FusedForm::kNone;  // set by the kernel's maker from the expression
  // Set by prepare_map: which compiled form runs the program (elementwise.cu), and the
  // operand slots it reads.
  uint8_t pattern = 0;
  int8_t slot[5] = {};
  uint8_t op[kMaxFusedInstructions] = {};
  int8_t a[kMaxFusedInstructions] = {}, b[kMaxFusedInstructions] = {};
  float alpha[kMaxFusedInstructions] = {}, beta[kMaxFusedInstructions] = {};
};

// What a map kernel reads besides its operands.
struct MapParams {
  ElementwiseOp elementwise = ElementwiseOp::kAdd;  // kElementwise: the table's row
  float scalars[4] = {};               // the row's ElementwiseParams (alpha, beta); epsilon; Clip defaults
  double scale = 0;                    // Mean: 1 / number of inputs (0: not Mean, or not yet)
  const void* bounds[2] = {};          // Clip's min and max inputs (device scalars) or null
  DType dynamic = DType::kF32;         // dtype of Pow's exponent / Cast's source
  int inputs = 0;                      // number of inputs
  FusedCode fused;                     // kFused only
};

// out = op(inputs...) at every element of out's sizes. Inputs must already be broadcast
// to out's sizes (stride 0 on broadcast dims); any strides, negative included.
struct MapSpec {
  MapOp op = MapOp::kElementwise;
  TensorView out;
  std::vector<TensorView> inputs;
  MapParams params;
};

// The index space of `spec` for N operands (the output, its inputs, then zero strides):
// the output's dims in its memory order (order_dims_by), collapsed; `data` gets each
// operand's address. INTERNAL when an input is not broadcast to the output.
template <int N>
Status make_map_indexer(const MapSpec& spec, StridedIndexer<N>* ix, void* (&data)[N]) {
  std::vector<Strides> strides{spec.out.strides};
  for (const TensorView& in : spec.inputs) {
    if (in.sizes != spec.out.sizes)
      return internal_error("elementwise input " + in.to_string() + " is not broadcast to " + spec.out.to_string());
    strides.push_back(in.strides);
  }
  while (strides.size() < size_t(N)) strides.push_back(Strides(spec.out.sizes.size(), 0));
  Shape sizes = spec.out.sizes;
  order_dims_by(spec.out.strides, sizes, strides);
  STRIDER_RETURN_IF_ERROR(make_indexer<N>(sizes, strides, ix));
  data[0] = device_data<std::byte>(spec.out);
  for (size_t k = 0; k < spec.inputs.size(); ++k) data[k + 1] = device_data<std::byte>(spec.inputs[k]);
  return Status::ok();
}

struct MapLaunch {
  using Launcher = cudaError_t (*)(const MapLaunch&, cudaStream_t);
  Launcher launcher = nullptr;
  bool vectorizes = false;  // whether the launcher's kernel has the vector mode
  Launcher row_launcher = nullptr;  // its row mode (compiled fused forms), if it has one
  int mode = 0;  // how elements are addressed (elementwise.cu: vector, linear, strided, rows)
  uint32_t inner_broadcast = 0;        // vector mode: operands broadcast along the innermost dim
  StridedIndexer<kMaxMapOperands> ix;  // dims in the output's memory order
  FastDivisor div[kMaxDims];
  void* data[kMaxMapOperands] = {};  // [0] the output, then the inputs
  MapParams params;
};

Status prepare_map(const MapSpec& spec, MapLaunch* launch);

// ---- map_group.cu ----------------------------------------------------------------------

// A FusedMapGroup (ops/fused_map_group.h) in one launch: blocks [first_block[m],
// first_block[m + 1]) compute member m's elements, one a thread. Members of at most
// kMapGroupInputs inputs, one dtype (f32, bf16, f16), below 2^31 elements each.
inline constexpr int kMapGroupMembers = 4;  // ops/fused_map_group.h's kMaxMapGroupMembers
inline constexpr int kMapGroupInputs = 4;   // the rotary halves' four; SiLU-gate's two
inline constexpr int kMapGroupOperands = kMapGroupInputs + 1;
struct MapGroupMember {
  StridedIndexer<kMapGroupOperands> ix;  // output first, dims in the output's memory order
  FastDivisor div[kMaxDims];
  void* data[kMapGroupOperands] = {};
  int inputs = 0;
  FusedCode code;  // code.form set by the kernel's maker: compiled, else interpreted
};
struct MapGroupArgs {
  int members = 0;
  uint32_t first_block[kMapGroupMembers + 1] = {};
  MapGroupMember member[kMapGroupMembers];
};
struct MapGroupLaunch {
  using Launcher = cudaError_t (*)(const MapGroupArgs&, cudaStream_t);
  Launcher launcher = nullptr;
  MapGroupArgs args;
};
// Every spec is a kFused map whose inputs are broadcast to its output; UNSUPPORTED where
// the members do not fit the kernel (the caller runs them one launch each instead).
Status prepare_map_group(const std::vector<MapSpec>& members, MapGroupLaunch* launch);
Status run_map_group(const MapGroupLaunch& launch, cudaStream_t stream);
// How the prepared launch addresses elements: "rows", "vector", "linear" or "strided".
const char* map_mode_name(const MapLaunch& launch);
Status run_map(const MapLaunch& launch, cudaStream_t stream);

// ---- reduce.cu -----------------------------------------------------------------------

enum class ReduceKind : uint8_t {
  kSum, kMean, kMax, kMin,
  kProd, kL1, kL2, kSumSquare, kLogSum, kLogSumExp,  // ops/reduce_math.h

  kPoolMax,  // max as MaxPool takes it: the first element, then only greater ones
  kSoftmax, kLogSoftmax,
};

// Every output row r reads the input elements of row r: rows are the kept dims, the inner
// dims are reduced (or, for softmax, normalized and written back at the same positions).
struct ReduceSpec {
  ReduceKind kind = ReduceKind::kSum;
  TensorView in, out;  // dtypes and addresses; sizes and strides come from the fields below
  Shape row_sizes;
  Strides in_row_strides, out_row_strides;
  Shape inner_sizes;
  Strides in_inner_strides, out_inner_strides;  // out_inner_strides: softmax only
};

struct ReduceLaunch {
  using Launcher = cudaError_t (*)(const ReduceLaunch&, cudaStream_t);
  Launcher launcher = nullptr;
  ReduceKind kind = ReduceKind::kSum;
  StridedIndexer<2> rows;   // operands: in, out
  StridedIndexer<2> inner;  // operands: in, out
  FastDivisor rows_div[kMaxDims], inner_div[kMaxDims];
  const void* in = nullptr;
  void* out = nullptr;
  int block_threads = 0;  // 0: a thread per row; else a block of this many threads per row
};

Status prepare_reduce(const ReduceSpec& spec, ReduceLaunch* launch);

// ArgMax / ArgMin: a thread per output element walks the axis (ops/reduce_math.h's rule).
struct ArgReduceLaunch {
  using Launcher = cudaError_t (*)(const ArgReduceLaunch&, cudaStream_t);
  Launcher launcher = nullptr;
  StridedIndexer<2> rows;  // the kept dims: in, out
  FastDivisor rows_div[kMaxDims];
  int64_t n = 0, step = 0;  // the axis's size and the input's stride along it
  bool max = true, last = false;
  const void* in = nullptr;
  int64_t* out = nullptr;
};
Status prepare_arg_reduce(const TensorView& in, const TensorView& out, int64_t axis, bool max, bool last,
                          ArgReduceLaunch* launch);
Status run_arg_reduce(const ArgReduceLaunch& launch, cudaStream_t stream);

// CumSum and CumProd: a thread per row of the other dims scans the axis (the CPU's order and accumulator).
struct CumSumLaunch {
  using Launcher = cudaError_t (*)(const CumSumLaunch&, cudaStream_t);
  Launcher launcher = nullptr;
  StridedIndexer<2> rows;  // in, out
  FastDivisor rows_div[kMaxDims];
  int64_t n = 0, in_step = 0, out_step = 0;
  bool exclusive = false, reverse = false, product = false;  // product: CumProd
  const void* in = nullptr;
  void* out = nullptr;
};
Status prepare_cumsum(const TensorView& in, const TensorView& out, int64_t axis, bool exclusive, bool reverse, bool product,
                      CumSumLaunch* launch);
Status run_cumsum(const CumSumLaunch& launch, cudaStream_t stream);

// TopK: a thread per input element counts the elements of its row that come before it
// (ops/reduce_math.h's topk_before) and, when that rank is below k, writes itself there.
struct TopKLaunch {
  using Launcher = cudaError_t (*)(const TopKLaunch&, cudaStream_t);
  Launcher launcher = nullptr;
  StridedIndexer<3> rows;  // in, values, indices
  int64_t n = 0, k = 0, in_step = 0, values_step = 0, indices_step = 0;
  bool largest = true;
  const void* in = nullptr;
  void* values = nullptr;
  int64_t* indices = nullptr;
};
Status prepare_topk(const TensorView& in, const TensorView& values, const TensorView& indices, int64_t axis, int64_t k,
                    bool largest, TopKLaunch* launch);
Status run_topk(const TopKLaunch& launch, cudaStream_t stream);
Status run_reduce(const ReduceLaunch& launch, cudaStream_t stream);

// ---- normalize.cu --------------------------------------------------------------------

// The normalization family (ops/normalization.h) as hal/normalization_views.h describes it:
// operands x, y, scale, bias, mean, inv_std (absent: null data); rows of inner elements.
inline constexpr int kNormLaunchOperands = 6;
struct NormSpec {
  Shape row_sizes, inner_sizes;
  std::vector<Strides> row_strides;    // kNormLaunchOperands
  std::vector<Strides> inner_strides;  // x, y, scale, bias
  DType dtype = DType::kF32;           // x, y, scale and bias
  DType stat_dtype = DType::kF32;      // mean and inv_std
  const void* x = nullptr;
  void* y = nullptr;
  const void* scale = nullptr;
  const void* bias = nullptr;
  void* mean = nullptr;
  void* inv_std = nullptr;
  float epsilon = 1e-5f;
  bool subtract_mean = true, epsilon_after_sqrt = false;
};

struct NormLaunch {
  using Launcher = cudaError_t (*)(const NormLaunch&, cudaStream_t);
  Launcher launcher = nullptr;
  StridedIndexer<kNormLaunchOperands> rows;
  StridedIndexer<4> inner;
  FastDivisor rows_div[kMaxDims], inner_div[kMaxDims];
  const void* x = nullptr;
  void* y = nullptr;
  const void* scale = nullptr;
  const void* bias = nullptr;
  void* mean = nullptr;
  void* inv_std = nullptr;
  DType stat_dtype = DType::kF32;
  float epsilon = 1e-5f;
  bool subtract_mean = true, epsilon_after_sqrt = false;
  int block_threads = 32;
};

Status prepare_normalize(const NormSpec& spec, NormLaunch* launch);
Status run_normalize(const NormLaunch& launch, cudaStream_t stream);

// ---- index_map.cu --------------------------------------------------------------------

// Pad and Tile (ops/index_map.h): output element (o_0, ..., o_r) copies the input element
// at offset tables[start[0] + o_0] + ... (device tables of element offsets), or the pad
// value when an entry is kNoSource. Element bytes move as they are.
inline constexpr int64_t kIndexMapNoSource = INT64_MIN;  // ops/index_map.h's kNoSource
struct IndexMapLaunch {
  using Launcher = cudaError_t (*)(const IndexMapLaunch&, cudaStream_t);
  Launcher launcher = nullptr;
  int rank = 0;
  int64_t count = 0;
  int64_t sizes[kMaxDims] = {}, out_strides[kMaxDims] = {}, table_start[kMaxDims] = {};
  FastDivisor div[kMaxDims];
  const int64_t* tables = nullptr;  // device memory the kernel owns
  const void* in = nullptr;
  void* out = nullptr;
  const void* value = nullptr;  // the pad value as a device scalar, or null: value_bits
  uint64_t value_bits = 0;
};

// `tables` are device addresses of the concatenated per-axis tables (entries per output dim).
Status prepare_index_map(const TensorView& in, const TensorView& out, const int64_t* tables, int element_size,
                         IndexMapLaunch* launch);
Status run_index_map(const IndexMapLaunch& launch, cudaStream_t stream);

// ---- pool.cu -------------------------------------------------------------------------

inline constexpr int kMaxPoolDims = 3;

// A window pool over NC + 1 to 3 spatial dims. Spatial parameters are given for the
// view's spatial dims, outermost first, as resolve_window returns them.
struct PoolSpec {
  bool max = true;
  bool count_include_pad = false;
  bool column_major_indices = false;  // MaxPool storage_order = 1
  TensorView x, y;
  TensorView indices;  // allocation null when MaxPool's Indices output is absent
  std::vector<int64_t> kernel, strides, dilations, pads_begin;
  std::vector<int64_t> pads_end;
};

// Geometry with the spatial dims padded to kMaxPoolDims by leading size-1 dims.
struct PoolArgs {
  int64_t count = 0;  // output elements
  int64_t channels = 0;
  int64_t in[kMaxPoolDims], out[kMaxPoolDims];
  int64_t kernel[kMaxPoolDims], stride[kMaxPoolDims], dilation[kMaxPoolDims];
  int64_t pad_begin[kMaxPoolDims], pad_end[kMaxPoolDims];
  int64_t x_strides[2 + kMaxPoolDims], y_strides[2 + kMaxPoolDims], i_strides[2 + kMaxPoolDims];
  FastDivisor out_div[kMaxPoolDims], channels_div;
  const void* x = nullptr;
  void* y = nullptr;
  int64_t* indices = nullptr;
  bool count_include_pad = false;
  bool column_major_indices = false;
  bool channels_last = false;  // output elements are numbered N, spatial..., C (coalesced NHWC writes)
  bool lanes = false;          // the 2-D channels-last max pool of 4 channels a thread (pool.cu)
};

struct PoolLaunch {
  using Launcher = cudaError_t (*)(const PoolArgs&, cudaStream_t);
  Launcher launcher = nullptr;
  PoolArgs args;
};

Status prepare_pool(const PoolSpec& spec, PoolLaunch* launch);
Status run_pool(const PoolLaunch& launch, cudaStream_t stream);

// ---- resize.cu -----------------------------------------------------------------------

// One output dim of a resize, in the kernel's loop order (outermost first).
struct ResizeAxis {
  int64_t size = 1;        // output length
  int64_t out_stride = 0;  // elements
  int64_t in_stride = 0;   // elements; used when `identity`
  int64_t width = 1;       // taps per output coordinate
  int64_t table = 0;       // first entry of this dim in the offset and weight tables
  int64_t flags = 0;       // first entry of this dim in the outside table
  bool identity = false;   // output coordinate x reads input x: no table
};

// Tap tables (device memory the kernel owns): per dim and output coordinate, `width`
// element offsets into the input (already multiplied by its stride) and weights (float,
// double for f64), and one byte per coordinate saying it is extrapolated.
struct ResizeSpec {
  TensorView x, y;
  std::vector<ResizeAxis> axes;  // loop order: the output's innermost memory dim last
  const int64_t* offsets = nullptr;
  const void* weights = nullptr;   // null: every dim has one tap of weight 1 (a gather)
  const uint8_t* outside = nullptr;  // null: nothing is extrapolated
  double extrapolation = 0;
};

struct ResizeArgs {
  int rank = 0;
  int64_t count = 0;
  ResizeAxis axes[kMaxDims];
  FastDivisor div[kMaxDims];
  const int64_t* offsets = nullptr;
  const void* weights = nullptr;
  const uint8_t* outside = nullptr;
  const void* x = nullptr;
  void* y = nullptr;
  double extrapolation = 0;
  uint64_t fill_bits = 0;  // the extrapolation value in the output dtype (gathers)
  bool small = false;      // count and every element offset fit in int32: 32-bit indexing
  // Gathers of 4 neighbouring outputs per thread (innermost dim contiguous, a multiple of
  // 4 and aligned): `inner` is the last axis, `inner_div` its size / 4.
  bool vector = false;
  ResizeAxis inner;
  FastDivisor inner_div;
};

struct ResizeLaunch {
  using Launcher = cudaError_t (*)(const ResizeArgs&, cudaStream_t);
  Launcher launcher = nullptr;
  ResizeArgs args;
};

// `fill_bits`: the extrapolation value stored as the output dtype (the caller converts).
Status prepare_resize(const ResizeSpec& spec, uint64_t fill_bits, ResizeLaunch* launch);
Status run_resize(const ResizeLaunch& launch, cudaStream_t stream);

}  // namespace strider::cuda

#if defined(__CUDACC__)
// ---- device helpers shared by the .cu files (nvcc only) ------------------------------
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

namespace strider::cuda::device {

inline constexpr int kThreads = 256;

// Storage type -> compute type (bf16 and f16 compute in f32) and the bits in memory
// (bool is one byte holding 0 or 1).
template <typename T> struct Traits { using Compute = T; using Bits = T; };
template <> struct Traits<__half> { using Compute = float; using Bits = __half; };
template <> struct Traits<__nv_bfloat16> { using Compute = float; using Bits = __nv_bfloat16; };
template <> struct Traits<bool> { using Compute = bool; using Bits = uint8_t; };
template <typename T> using Compute = typename Traits<T>::Compute;
template <typename T> using Bits = typename Traits<T>::Bits;

template <typename T>
__device__ __forceinline__ Compute<T> to_compute(Bits<T> v) {
  if constexpr (std::is_same_v<T, __half>) return __half2float(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(v);
  else if constexpr (std::is_same_v<T, bool>) return v != 0;
  else return v;
}
// Rounds to nearest even for bf16 and f16, as src/base/float16.h does.
template <typename T>
__device__ __forceinline__ Bits<T> to_bits(Compute<T> v) {
  if constexpr (std::is_same_v<T, __half>) return __float2half_rn(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __float2bfloat16_rn(v);
  else if constexpr (std::is_same_v<T, bool>) return uint8_t(v ? 1 : 0);
  else return v;
}
template <typename T>
__device__ __forceinline__ Compute<T> load(const void* base, int64_t offset) {
  return to_compute<T>(static_cast<const Bits<T>*>(base)[offset]);
}
template <typename T>
__device__ __forceinline__ void store(void* base, int64_t offset, Compute<T> v) {
  static_cast<Bits<T>*>(base)[offset] = to_bits<T>(v);
}

// kLanes neighbouring channels of a channels-last view as one load or store (the own
// depthwise convolution and max pool): 16 bytes of f32, 8 of bf16 or f16, so a warp moves
// 256-512 contiguous bytes where a scalar form's warp moved 64 bytes of 16-bit channels.
// The address must be aligned to the vector.
constexpr int kLanes = 4;
template <typename T> struct LaneVector;
template <> struct LaneVector<float> { using type = float4; };
template <> struct LaneVector<__nv_bfloat16> { using type = uint2; };
template <> struct LaneVector<__half> { using type = uint2; };

template <typename T>
__device__ __forceinline__ void load_lanes(const Bits<T>* p, float (&v)[kLanes]) {
  const typename LaneVector<T>::type raw = *reinterpret_cast<const typename LaneVector<T>::type*>(p);
  if constexpr (std::is_same_v<T, float>) {
    v[0] = raw.x, v[1] = raw.y, v[2] = raw.z, v[3] = raw.w;
  } else {
    const Bits<T>* bits = reinterpret_cast<const Bits<T>*>(&raw);
#pragma unroll
    for (int l = 0; l < kLanes; ++l) v[l] = to_compute<T>(bits[l]);
  }
}
template <typename T>
__device__ __forceinline__ void store_lanes(Bits<T>* p, const float (&v)[kLanes]) {
  typename LaneVector<T>::type raw;
  if constexpr (std::is_same_v<T, float>) {
    raw = make_float4(v[0], v[1], v[2], v[3]);
  } else {
    Bits<T>* bits = reinterpret_cast<Bits<T>*>(&raw);
#pragma unroll
    for (int l = 0; l < kLanes; ++l) bits[l] = to_bits<T>(v[l]);
  }
  *reinterpret_cast<typename LaneVector<T>::type*>(p) = raw;
}

// Quotient and remainder of n < 2^31 by a FastDivisor.
__device__ __forceinline__ uint32_t fast_divide(uint32_t n, const FastDivisor& d) {
  return (__umulhi(n, d.magic) + n) >> d.shift;
}

// Element offsets of element `linear` (row-major over ix.sizes) in the first N operands;
// `div` holds ix's dims as FastDivisors (for counts below 2^31).
template <int N, int M>
__device__ __forceinline__ void strided_offsets(const StridedIndexer<M>& ix, const FastDivisor (&div)[kMaxDims],
                                                int64_t linear, int64_t (&out)[N]) {
#pragma unroll
  for (int k = 0; k < N; ++k) out[k] = 0;
  if (ix.count <= int64_t(INT32_MAX)) {
    uint32_t rest = uint32_t(linear);
#pragma unroll
    for (int d = kMaxDims - 1; d >= 0; --d) {
      if (d >= ix.rank) continue;
      uint32_t quotient = fast_divide(rest, div[d]);
      int64_t index = int64_t(rest - quotient * div[d].divisor);
      rest = quotient;
#pragma unroll
      for (int k = 0; k < N; ++k) out[k] += index * ix.strides[k][d];
    }
    return;
  }
#pragma unroll
  for (int d = kMaxDims - 1; d >= 0; --d) {
    if (d >= ix.rank) continue;
    int64_t index = linear % ix.sizes[d];
    linear /= ix.sizes[d];
#pragma unroll
    for (int k = 0; k < N; ++k) out[k] += index * ix.strides[k][d];
  }
}

inline constexpr int kMaxWarps = kThreads / 32;

// Combines each thread's `value` over the block in thread order; the result is valid in
// thread 0. `identity` fills the slots of missing warps. Every thread of the block calls it.
template <typename A, typename Merge>
__device__ A block_combine(A value, A identity, Merge merge_fn) {
  __shared__ A partial[kMaxWarps];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int offset = 16; offset > 0; offset /= 2) value = merge_fn(value, __shfl_down_sync(0xffffffffu, value, offset));
  if (lane == 0) partial[warp] = value;
  __syncthreads();
  if (warp == 0) {
    value = lane < int(blockDim.x / 32) ? partial[lane] : identity;
    for (int offset = 16; offset > 0; offset /= 2) value = merge_fn(value, __shfl_down_sync(0xffffffffu, value, offset));
  }
  __syncthreads();  // `partial` is reused by the next call
  return value;
}

// A ConvEpilogue's activation, fixed at compile time, with the instructions' own scalar
// math (fused_math).
template <ConvActivation kAct>
__device__ __forceinline__ float apply_activation(const ConvEpilogue& e, float x) {
  using fused_math::apply;
  if constexpr (kAct == ConvActivation::kRelu) return apply<FusedOp::kRelu>(x, 0.0f, 0.0f, 0.0f);
  if constexpr (kAct == ConvActivation::kClip) return apply<FusedOp::kClip>(x, 0.0f, e.low, e.high);
  if constexpr (kAct == ConvActivation::kSigmoid) return apply<FusedOp::kSigmoid>(x, 0.0f, 0.0f, 0.0f);
  if constexpr (kAct == ConvActivation::kTanh) return apply<FusedOp::kTanh>(x, 0.0f, 0.0f, 0.0f);
  if constexpr (kAct == ConvActivation::kSilu)
    return apply<FusedOp::kMul>(x, apply<FusedOp::kSigmoid>(x, 0.0f, 0.0f, 0.0f), 0.0f, 0.0f);
  if constexpr (kAct == ConvActivation::kGeluErf) {
    const float erf = apply<FusedOp::kErf>(apply<FusedOp::kDiv>(x, e.k[0], 0.0f, 0.0f), 0.0f, 0.0f, 0.0f);
    return apply<FusedOp::kMul>(apply<FusedOp::kMul>(x, apply<FusedOp::kAdd>(erf, e.k[1], 0.0f, 0.0f), 0.0f, 0.0f), e.k[2],
                                0.0f, 0.0f);
  }
  if constexpr (kAct == ConvActivation::kGeluTanh) {
    const float cube = apply<FusedOp::kMul>(x, apply<FusedOp::kMul>(x, x, 0.0f, 0.0f), 0.0f, 0.0f);
    const float inner = apply<FusedOp::kAdd>(x, apply<FusedOp::kMul>(e.k[0], cube, 0.0f, 0.0f), 0.0f, 0.0f);
    const float t = apply<FusedOp::kTanh>(apply<FusedOp::kMul>(e.k[1], inner, 0.0f, 0.0f), 0.0f, 0.0f, 0.0f);
    return apply<FusedOp::kMul>(e.k[3], apply<FusedOp::kMul>(x, apply<FusedOp::kAdd>(e.k[2], t, 0.0f, 0.0f), 0.0f, 0.0f),
                                0.0f, 0.0f);
  }
  return x;  // kNone
}

// fn.template operator()<kAct>() for the activation `act`. A kernel that applies the
// activation to many unrolled elements (a thread's tile of outputs) calls this once around
// its unrolled loop: apply_conv_epilogue inside such a loop inlines its whole switch per
// element, and session 43 found kernels of 120-458 KB of code that way.
template <typename Fn>
__device__ __forceinline__ void with_activation(ConvActivation act, Fn&& fn) {
  switch (act) {
    case ConvActivation::kNone: fn.template operator()<ConvActivation::kNone>(); break;
    case ConvActivation::kRelu: fn.template operator()<ConvActivation::kRelu>(); break;
    case ConvActivation::kClip: fn.template operator()<ConvActivation::kClip>(); break;
    case ConvActivation::kSigmoid: fn.template operator()<ConvActivation::kSigmoid>(); break;
    case ConvActivation::kTanh: fn.template operator()<ConvActivation::kTanh>(); break;
    case ConvActivation::kSilu: fn.template operator()<ConvActivation::kSilu>(); break;
    case ConvActivation::kGeluErf: fn.template operator()<ConvActivation::kGeluErf>(); break;
    case ConvActivation::kGeluTanh: fn.template operator()<ConvActivation::kGeluTanh>(); break;
  }
}

// A ConvEpilogue applied to one f32 result (a loop over outputs that keeps one copy of it).
__device__ __forceinline__ float apply_conv_epilogue(const ConvEpilogue& e, float x) {
  float y = x;
  with_activation(e.activation, [&]<ConvActivation kAct>() { y = apply_activation<kAct>(e, x); });
  return y;
}

__device__ __forceinline__ int64_t global_thread() { return int64_t(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ __forceinline__ int64_t grid_threads() { return int64_t(gridDim.x) * blockDim.x; }

}  // namespace strider::cuda::device
#endif  // __CUDACC__
