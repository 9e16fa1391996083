// Reductions (every ReduceX of ops/reduce_math.h) and Softmax / LogSoftmax.
// Both walk "outer x reduced" index spaces over strided views and accumulate in f32
// (f64 for f64, i64 for integers).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <limits>

#include "base/checked_math.h"
#include "hal/axis_rows.h"
#include "base/cache_aligned.h"
#include "hal/cpu/cpu_kernels.h"
#include "hal/cpu/dtype_dispatch.h"
#include "hal/cpu/parallel.h"
#include "hal/cpu/strided_loop.h"
#include "hal/cpu/vector_math.h"
#include "ops/reduce_math.h"
#include "ops/shape_ops.h"

namespace strider::cpu {
namespace {

using KernelPtr = std::unique_ptr<Kernel>;

template <typename T>
using Accumulator = std::conditional_t<std::is_same_v<T, double>, double,
                                       std::conditional_t<std::is_integral_v<T>, int64_t, float>>;

int64_t offset_of(const Shape& index, const std::vector<int64_t>& dims, const Strides& strides) {
  int64_t offset = 0;
  for (size_t i = 0; i < dims.size(); ++i) offset += index[i] * strides[size_t(dims[i])];
  return offset;
}

using ReduceOp = ReduceMath;

// Splits the input dims into kept (outer) and reduced ones and visits each output.
template <typename T>
class ReduceKernel final : public Kernel {
  using Acc = Accumulator<T>;

 public:
  ReduceKernel(TensorView in, TensorView out, ReduceParams p, ReduceOp op)
      : in_(std::move(in)), out_(std::move(out)), op_(op) {
    std::vector<bool> reduced(size_t(in_.rank()), false);
    if (!p.noop)
      for (int64_t a : p.axes) reduced[size_t(a)] = true;
    for (int64_t d = 0; d < in_.rank(); ++d) {
      (reduced[size_t(d)] ? reduced_dims_ : kept_dims_).push_back(d);
      (reduced[size_t(d)] ? reduced_sizes_ : kept_sizes_).push_back(in_.sizes[size_t(d)]);
    }
    // With keepdims (or no reduction) the output has the input's rank and the kept dims
    // keep their positions; without, it holds just the kept dims in order.
    bool same_rank = out_.rank() == in_.rank();
    for (size_t i = 0; i < kept_dims_.size(); ++i)
      out_kept_strides_.push_back(out_.strides[same_rank ? size_t(kept_dims_[i]) : i]);
  }

  Status run(const QueueContext& context) override {
    Shape outer(kept_sizes_.size(), 0);
    const T* in = in_.host_data_as<T>();
    T* out = out_.host_data_as<T>();
    int64_t count = num_elements(reduced_sizes_);
    for (int64_t o = 0; o < num_elements(kept_sizes_); ++o, advance_index(outer, kept_sizes_)) {
      const T* base = in + offset_of(outer, kept_dims_, in_.strides);
      Acc row_max = Acc(0);
      if (reduce_needs_max(op_)) row_max = fold(base, count, ReduceOp::kMax, Acc(0));
      Acc acc = fold(base, count, op_, row_max);
      int64_t out_offset = 0;
      for (size_t i = 0; i < outer.size(); ++i) out_offset += outer[i] * out_kept_strides_[i];
      out[out_offset] = store<T>(ComputeType<T>(reduce_finish(op_, acc, count, row_max)));
    }
    return Status::ok();
  }
  std::string implementation() const override { return "strider:reduce"; }

 private:
  // -inf / +inf for floats, not lowest / max: a row of -inf reduces to -inf (an attention
  // row masked out entirely is found by comparing its max with -inf).
  Acc initial(ReduceOp op) const {
    using L = std::numeric_limits<Acc>;
    if (op == ReduceOp::kMax) return L::has_infinity ? -L::infinity() : L::lowest();
    if (op == ReduceOp::kMin) return L::has_infinity ? L::infinity() : L::max();
    return op == ReduceOp::kProd ? Acc(1) : Acc(0);
  }
  // The row's elements mapped and combined as `op` says.
  Acc fold(const T* base, int64_t count, ReduceOp op, Acc row_max) const {
    Acc acc = initial(op);
    Shape inner(reduced_sizes_.size(), 0);
    for (int64_t i = 0; i < count; ++i, advance_index(inner, reduced_sizes_))
      acc = reduce_combine(op, acc, reduce_map(op, Acc(load(base[offset_of(inner, reduced_dims_, in_.strides)])), row_max));
    return acc;
  }

  TensorView in_, out_;
  ReduceOp op_;
  std::vector<int64_t> kept_dims_, reduced_dims_;
  Shape kept_sizes_, reduced_sizes_;
  Strides out_kept_strides_;
};

Result<KernelPtr> make_reduce(const KernelRequest& r, ReduceOp op) {
  NodeInputs node(r.graph, r.node);
  STRIDER_ASSIGN_OR_RETURN(ReduceParams p, resolve_reduce(node));
  return dispatch_dtype(r.inputs[0].dtype, [&]<typename T>() -> Result<KernelPtr> {
    if constexpr (!std::is_floating_point_v<ComputeType<T>>) {
      if (reduce_is_float_only(op)) return unsupported(fmt::format("{} on {}", r.node.op_type, dtype_name(r.inputs[0].dtype)));
    }
    if constexpr (std::is_same_v<T, bool>) {
      // Max and Min of booleans are "any" and "all"; sums of booleans are not defined.
      if (op != ReduceOp::kMax && op != ReduceOp::kMin) return unsupported(fmt::format("{} on bool", r.node.op_type));
      return KernelPtr(new ReduceKernel<uint8_t>(r.inputs[0], r.outputs[0], p, op));
    } else {
      return KernelPtr(new ReduceKernel<T>(r.inputs[0], r.outputs[0], p, op));
    }
  });
}

// Softmax (log-softmax) of the rows of 16 lanes side by side: `tile` holds [count][16]
// values, element i of lane l at i * 16 + l, and as much again of scratch (log-softmax's
// exponentials); the results replace the values. Compiled per CPU (AVX-512, AVX2,
// baseline): YOLOv8n's DFL (4 x 2100 rows of 16 bins at a stride of 2100, written bins
// inner) took 0.32 ms at one thread through loops built for the baseline.
constexpr int64_t kSoftmaxLanes = 16;
STRIDER_CPU_CLONES void softmax_tile_f32(float* tile, int64_t count, bool log) {
  constexpr int64_t L = kSoftmaxLanes;
  float max[L], sum[L];
  for (int64_t l = 0; l < L; ++l) max[l] = -std::numeric_limits<float>::infinity(), sum[l] = 0.0f;
  for (int64_t i = 0; i < count; ++i)
    for (int64_t l = 0; l < L; ++l) max[l] = std::max(max[l], tile[i * L + l]);
  for (int64_t i = 0; i < count; ++i)
    for (int64_t l = 0; l < L; ++l) tile[i * L + l] -= max[l];
  float* exps = log ? tile + count * L : tile;
  vector_math::exp_row(tile, exps, count * L);
  for (int64_t i = 0; i < count; ++i)
    for (int64_t l = 0; l < L; ++l) sum[l] += exps[i * L + l];
  for (int64_t l = 0; l < L; ++l) sum[l] = log ? std::log(sum[l]) : 1.0f / sum[l];
  for (int64_t i = 0; i < count; ++i)
    for (int64_t l = 0; l < L; ++l) tile[i * L + l] = log ? tile[i * L + l] - sum[l] : exps[i * L + l] * sum[l];
}

// The f32 block: `lanes` rows (the rest of the 16 zero), element i of lane l at
// in[i * in_step + l * in_lane], through `tile` into out likewise.
STRIDER_CPU_CLONES void softmax_lanes_f32(const float* in, int64_t in_step, int64_t in_lane, float* out,
                                          int64_t out_step, int64_t out_lane, int64_t count, int64_t lanes, bool log,
                                          float* tile) {
  constexpr int64_t L = kSoftmaxLanes;
  for (int64_t i = 0; i < count; ++i) {
    float* row = tile + i * L;
    if (lanes == L && in_lane == 1) {
      for (int64_t l = 0; l < L; ++l) row[l] = in[i * in_step + l];
    } else {
      for (int64_t l = 0; l < L; ++l) row[l] = l < lanes ? in[i * in_step + l * in_lane] : 0.0f;
    }
  }
  softmax_tile_f32(tile, count, log);
  if (out_step == 1) {  // each lane's row is contiguous in out: write it whole
    for (int64_t l = 0; l < lanes; ++l)
      for (int64_t i = 0; i < count; ++i) out[l * out_lane + i] = tile[i * L + l];
    return;
  }
  for (int64_t i = 0; i < count; ++i)
    for (int64_t l = 0; l < lanes; ++l) out[i * out_step + l * out_lane] = tile[i * L + l];
}

// Softmax over `axes` (the last axis from opset 13; the flattened tail from `axis` before).
template <typename T>
class SoftmaxKernel final : public Kernel {
  using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

 public:
  SoftmaxKernel(TensorView in, TensorView out, int64_t first_axis, int64_t last_axis, bool log)
      : in_(std::move(in)), out_(std::move(out)), log_(log) {
    for (int64_t d = 0; d < in_.rank(); ++d) {
      bool reduced = d >= first_axis && d <= last_axis;
      (reduced ? reduced_dims_ : kept_dims_).push_back(d);
      (reduced ? reduced_sizes_ : kept_sizes_).push_back(in_.sizes[size_t(d)]);
    }
  }
  Status run(const QueueContext& context) override {
    // An empty input has no rows; its reduced dims may still be huge ([0, 2^32]), so no
    // row buffer is sized from them.
    if (in_.num_elements() == 0) return Status::ok();
    const int64_t count = num_elements(reduced_sizes_);
    if (rows_.empty()) {  // once: one row of scratch per thread the kernel may use
      threads_ = max_parallel_threads();
      row_stride_ = cache_lines_of<Acc>(size_t(count) * (lanes_path() ? 2 * kLanes : 1));
      rows_.resize(size_t(threads_) * row_stride_);
      if (lanes_path()) line_offsets_ = lanes_line_offsets();
    }
    if (lanes_path()) {
      const int64_t line = kept_sizes_.back(), blocks = (line + kLanes - 1) / kLanes;
      parallel_for(num_elements(kept_sizes_) / line * blocks, count * kLanes * 4, [&](int64_t begin, int64_t end, int thread) {
        Acc* tile = rows_.data() + size_t(thread) * row_stride_;
        for (int64_t g = begin; g < end; ++g) softmax_lanes(g / blocks, (g % blocks) * kLanes, tile, count);
      }, threads_);
      return Status::ok();
    }
    parallel_for(num_elements(kept_sizes_), count * 4, [&](int64_t begin, int64_t end, int thread) {
      Acc* row = rows_.data() + size_t(thread) * row_stride_;
      Shape outer = unflatten_index(begin, kept_sizes_);
      for (int64_t o = begin; o < end; ++o, advance_index(outer, kept_sizes_)) softmax_row(outer, row, count);
    }, threads_);
    return Status::ok();
  }
  std::string implementation() const override { return log_ ? "strider:logsoftmax" : "strider:softmax"; }


 private:
  // The row at `outer` through f32 (f64) scratch: max, exp (vectorized for f32), sum, scale.
  void softmax_row(const Shape& outer, Acc* row, int64_t count) const {
    const T* in = in_.host_data_as<T>();
    T* out = out_.host_data_as<T>();
    const int64_t in_base = offset_of(outer, kept_dims_, in_.strides);
    const int64_t out_base = offset_of(outer, kept_dims_, out_.strides);
    // One reduced dim (the usual last axis) steps by its stride; several walk an index.
    const bool one_dim = reduced_dims_.size() == 1;
    const int64_t in_step = one_dim ? in_.strides[size_t(reduced_dims_[0])] : 0;
    const int64_t out_step = one_dim ? out_.strides[size_t(reduced_dims_[0])] : 0;
    Shape inner(reduced_sizes_.size(), 0);
    Acc max = -std::numeric_limits<Acc>::infinity();
    for (int64_t i = 0; i < count; ++i) {
      int64_t at = one_dim ? in_base + i * in_step : in_base + offset_of(inner, reduced_dims_, in_.strides);
      row[i] = Acc(load(in[at]));
      max = std::max(max, row[i]);
      if (!one_dim) advance_index(inner, reduced_sizes_);
    }
    for (int64_t i = 0; i < count; ++i) row[i] -= max;
    Acc sum = 0;
    if (log_) {
      for (int64_t i = 0; i < count; ++i) sum += std::exp(row[i]);
      const Acc log_sum = std::log(sum);
      for (int64_t i = 0; i < count; ++i) row[i] -= log_sum;
    } else {
      if constexpr (std::is_same_v<Acc, float>) vector_math::exp_row(row, row, count);
      else for (int64_t i = 0; i < count; ++i) row[i] = std::exp(row[i]);
      for (int64_t i = 0; i < count; ++i) sum += row[i];
      const Acc scale = Acc(1) / sum;
      for (int64_t i = 0; i < count; ++i) row[i] *= scale;
    }
    inner.assign(inner.size(), 0);
    for (int64_t i = 0; i < count; ++i) {
      int64_t at = one_dim ? out_base + i * out_step : out_base + offset_of(inner, reduced_dims_, out_.strides);
      out[at] = store<T>(ComputeType<T>(row[i]));
      if (!one_dim) advance_index(inner, reduced_sizes_);
    }
  }
  // Rows that are not contiguous in memory (a softmax over a channel axis, YOLOv8's DFL:
  // 16 bins at a stride of 8400) go kLanes at a time, side by side along the last kept dim:
  // max, exp, sum and scale then run across the lanes instead of a strided row at a time
  // (0.88 ms of a YOLOv8n run, about 100 ns per row of 16).
  static constexpr int64_t kLanes = kSoftmaxLanes;
  bool lanes_path() const {
    return std::is_same_v<Acc, float> && reduced_dims_.size() == 1 && !kept_dims_.empty() &&
           kept_sizes_.back() > 1 && in_.strides[size_t(reduced_dims_[0])] != 1;
  }

  // Per line (kept index with the last kept dim at 0): its offsets in `in` and `out`,
  // computed once: working them out per block of lanes (index vectors on the heap) cost
  // as much as the block's arithmetic.
  std::vector<std::pair<int64_t, int64_t>> lanes_line_offsets() const {
    const Shape line_sizes(kept_sizes_.begin(), kept_sizes_.end() - 1);
    std::vector<std::pair<int64_t, int64_t>> offsets;
    Shape outer(line_sizes.size(), 0);
    for (int64_t line = 0, lines = num_elements(line_sizes); line < lines; ++line, advance_index(outer, line_sizes)) {
      Shape at = outer;
      at.push_back(0);
      offsets.emplace_back(offset_of(at, kept_dims_, in_.strides), offset_of(at, kept_dims_, out_.strides));
    }
    return offsets;
  }

  // The rows at kept index (line, first + l) for l < kLanes (fewer at the line's end),
  // through `tile` ([count][kLanes], then a second one for log-softmax's exponentials).
  void softmax_lanes(int64_t line, int64_t first, Acc* tile, int64_t count) const {
    const int64_t lanes = std::min(kLanes, kept_sizes_.back() - first);
    const int64_t lane_dim = kept_dims_.back(), axis = reduced_dims_[0];
    const int64_t in_lane = in_.strides[size_t(lane_dim)], out_lane = out_.strides[size_t(lane_dim)];
    const T* in = in_.host_data_as<T>() + line_offsets_[size_t(line)].first + first * in_lane;
    T* out = out_.host_data_as<T>() + line_offsets_[size_t(line)].second + first * out_lane;
    const int64_t in_step = in_.strides[size_t(axis)];
    const int64_t out_step = out_.strides[size_t(axis)];
    if constexpr (std::is_same_v<T, float>) {
      softmax_lanes_f32(in, in_step, in_lane, out, out_step, out_lane, count, lanes, log_, tile);
    } else if constexpr (std::is_same_v<Acc, float>) {  // bf16, f16: converted through the tile
      for (int64_t i = 0; i < count; ++i)
        for (int64_t l = 0; l < kLanes; ++l) tile[i * kLanes + l] = l < lanes ? Acc(load(in[i * in_step + l * in_lane])) : 0;
      softmax_tile_f32(tile, count, log_);
      for (int64_t i = 0; i < count; ++i)
        for (int64_t l = 0; l < lanes; ++l) out[i * out_step + l * out_lane] = store<T>(ComputeType<T>(tile[i * kLanes + l]));
    }
  }

  TensorView in_, out_;
  bool log_;
  std::vector<int64_t> kept_dims_, reduced_dims_;
  Shape kept_sizes_, reduced_sizes_;
  int threads_ = 1;
  CacheAlignedVector<Acc> rows_;  // threads_ rows of the reduced size, made by the first run
  std::vector<std::pair<int64_t, int64_t>> line_offsets_;  // lanes_line_offsets(), made by the first run
  size_t row_stride_ = 0;         // one thread's row, in whole cache lines
};

Result<KernelPtr> make_softmax(const KernelRequest& r, bool log) {
  int64_t rank = r.inputs[0].rank();
  STRIDER_ASSIGN_OR_RETURN(int64_t axis, r.node.attributes.get_int("axis", r.node.opset < 13 ? 1 : -1));
  if (axis < 0) axis += rank;
  // Before opset 13 the input is coerced to 2-D at `axis`: every dim from it on is reduced.
  int64_t last = r.node.opset < 13 ? rank - 1 : axis;
  if (rank == 0) axis = last = 0;
  return dispatch_dtype(r.inputs[0].dtype, [&]<typename T>() -> Result<KernelPtr> {
    if constexpr (is_float_storage_v<T>) {
      return KernelPtr(new SoftmaxKernel<T>(r.inputs[0], r.outputs[0], axis, last, log));
    } else {
      return unsupported(fmt::format("{} on {}", r.node.op_type, dtype_name(r.inputs[0].dtype)));
    }
  });
}

// ArgMax / ArgMin along one axis (ops/shape_ops.h's rule for ties and NaN), int64 out.
template <typename T>
class ArgReduceKernel final : public Kernel {
 public:
  ArgReduceKernel(TensorView in, TensorView out, ArgReduceParams p) : in_(std::move(in)), out_(std::move(out)), p_(p) {
    AxisRows rows = axis_rows(p_.axis, {&in_, &out_});  // without keepdims out has no axis dim
    kept_sizes_ = rows.sizes;
    in_kept_strides_ = rows.strides[0];
    out_kept_strides_ = rows.strides[1];
  }
  Status run(const QueueContext&) override {
    const T* in = in_.host_data_as<T>();
    int64_t* out = out_.host_data_as<int64_t>();
    const int64_t n = in_.sizes[size_t(p_.axis)], step = in_.strides[size_t(p_.axis)];
    Shape index(kept_sizes_.size(), 0);
    for (int64_t o = 0; o < num_elements(kept_sizes_); ++o, advance_index(index, kept_sizes_)) {
      int64_t base = 0, target = 0;
      for (size_t d = 0; d < index.size(); ++d) {
        base += index[d] * in_kept_strides_[d];
        target += index[d] * out_kept_strides_[d];
      }
      auto best = load(in[base]);
      int64_t at = 0;
      for (int64_t j = 1; j < n; ++j) {
        auto x = load(in[base + j * step]);
        if (arg_reduce_takes(p_.max, p_.last, x, best)) {
          best = x;
          at = j;
        }
      }
      out[target] = at;
    }
    return Status::ok();
  }
  std::string implementation() const override { return "strider:arg-reduce"; }

 private:
  TensorView in_, out_;
  ArgReduceParams p_;
  Shape kept_sizes_;
  Strides in_kept_strides_, out_kept_strides_;
};

Result<KernelPtr> make_arg_reduce(const KernelRequest& r) {
  STRIDER_ASSIGN_OR_RETURN(ArgReduceParams p, resolve_arg_reduce(NodeInputs(r.graph, r.node)));
  return dispatch_dtype(r.inputs[0].dtype, [&]<typename T>() -> Result<KernelPtr> {
    if constexpr (std::is_same_v<T, bool>) return unsupported(fmt::format("{} on bool", r.node.op_type));
    else return KernelPtr(new ArgReduceKernel<T>(r.inputs[0], r.outputs[0], p));
  });
}

// CumSum (CumProd): a running sum (product) along the axis per row of the other dims, in the
// accumulator type (integers wrap).
template <typename T>
class CumSumKernel final : public Kernel {
  using Acc = Accumulator<T>;

 public:
  CumSumKernel(TensorView in, TensorView out, CumSumParams p) : in_(std::move(in)), out_(std::move(out)), p_(p) {
    AxisRows rows = axis_rows(p_.axis, {&in_, &out_});
    rows_ = rows.sizes;
    in_rows_ = rows.strides[0];
    out_rows_ = rows.strides[1];
  }
  Status run(const QueueContext&) override {
    const T* in = in_.host_data_as<T>();
    T* out = out_.host_data_as<T>();
    const int64_t n = in_.sizes[size_t(p_.axis)];
    const int64_t in_step = in_.strides[size_t(p_.axis)], out_step = out_.strides[size_t(p_.axis)];
    Shape index(rows_.size(), 0);
    for (int64_t r = 0; r < num_elements(rows_); ++r, advance_index(index, rows_)) {
      int64_t in_base = 0, out_base = 0;
      for (size_t d = 0; d < index.size(); ++d) {
        in_base += index[d] * in_rows_[d];
        out_base += index[d] * out_rows_[d];
      }
      Acc acc = Acc(p_.product ? 1 : 0);
      for (int64_t t = 0; t < n; ++t) {
        const int64_t j = p_.reverse ? n - 1 - t : t;
        const Acc x = Acc(load(in[in_base + j * in_step]));
        const Acc next = p_.product ? wrapping_mul(acc, x) : wrapping_add(acc, x);
        out[out_base + j * out_step] = store<T>(ComputeType<T>(p_.exclusive ? acc : next));
        acc = next;
      }
    }
    return Status::ok();
  }
  std::string implementation() const override { return p_.product ? "strider:CumProd" : "strider:CumSum"; }

 private:
  TensorView in_, out_;
  CumSumParams p_;
  Shape rows_;
  Strides in_rows_, out_rows_;
};

Result<KernelPtr> make_cumsum(const KernelRequest& r) {
  STRIDER_ASSIGN_OR_RETURN(CumSumParams p, resolve_cumsum(NodeInputs(r.graph, r.node)));
  return dispatch_dtype(r.inputs[0].dtype, [&]<typename T>() -> Result<KernelPtr> {
    if constexpr (std::is_same_v<T, bool>) return unsupported(fmt::format("{} on bool", r.node.op_type));
    else return KernelPtr(new CumSumKernel<T>(r.inputs[0], r.outputs[0], p));
  });
}

// TopK: per row, the indices ordered by topk_before (a partial sort of the first k), then
// the values and indices written along the outputs' axis.
template <typename T>
class TopKKernel final : public Kernel {
 public:
  TopKKernel(TensorView in, TensorView values, TensorView indices, TopKParams p)
      : in_(std::move(in)), values_(std::move(values)), indices_(std::move(indices)), p_(p),
        rows_(axis_rows(p.axis, {&in_, &values_, &indices_})) {}
  Status run(const QueueContext&) override {
    const T* in = in_.host_data_as<T>();
    T* values = values_.host_data_as<T>();
    int64_t* indices = indices_.host_data_as<int64_t>();
    const size_t axis = size_t(p_.axis);
    const int64_t n = in_.sizes[axis];
    std::vector<int64_t> order(static_cast<size_t>(n));
    Shape index(rows_.sizes.size(), 0);
    for (int64_t r = 0; r < num_elements(rows_.sizes); ++r, advance_index(index, rows_.sizes)) {
      int64_t at[3] = {0, 0, 0};
      for (size_t d = 0; d < index.size(); ++d)
        for (size_t k = 0; k < 3; ++k) at[k] += index[d] * rows_.strides[k][d];
      auto x = [&](int64_t j) { return load(in[at[0] + j * in_.strides[axis]]); };
      std::iota(order.begin(), order.end(), int64_t(0));
      std::partial_sort(order.begin(), order.begin() + p_.k, order.end(),
                        [&](int64_t a, int64_t b) { return topk_before(p_.largest, x(a), a, x(b), b); });
      for (int64_t j = 0; j < p_.k; ++j) {
        values[at[1] + j * values_.strides[axis]] = in[at[0] + order[size_t(j)] * in_.strides[axis]];
        indices[at[2] + j * indices_.strides[axis]] = order[size_t(j)];
      }
    }
    return Status::ok();
  }
  std::string implementation() const override { return "strider:TopK"; }

 private:
  TensorView in_, values_, indices_;
  TopKParams p_;
  AxisRows rows_;
};

Result<KernelPtr> make_topk(const KernelRequest& r) {
  STRIDER_ASSIGN_OR_RETURN(TopKParams p, resolve_topk(NodeInputs(r.graph, r.node)));
  if (r.outputs.size() < 2 || !r.outputs[1].allocation) return unsupported("TopK without its Indices output");
  return dispatch_dtype(r.inputs[0].dtype, [&]<typename T>() -> Result<KernelPtr> {
    if constexpr (std::is_same_v<T, bool>) return unsupported("TopK on bool");
    else return KernelPtr(new TopKKernel<T>(r.inputs[0], r.outputs[0], r.outputs[1], p));
  });
}

}  // namespace

void register_reduce_kernels(std::vector<KernelEntry>& table) {
  table.push_back({"TopK", make_topk});
  table.push_back({"CumSum", make_cumsum});
  table.push_back({"CumProd", make_cumsum});
  table.push_back({"ArgMax", make_arg_reduce});
  table.push_back({"ArgMin", make_arg_reduce});
#define STRIDER_REDUCE_KERNEL(op, name) \
  table.push_back({name, [](const KernelRequest& r) { return make_reduce(r, ReduceOp::op); }});
  STRIDER_REDUCE_OPS(STRIDER_REDUCE_KERNEL)
#undef STRIDER_REDUCE_KERNEL
  table.push_back({"Softmax", [](const KernelRequest& r) { return make_softmax(r, false); }});
  table.push_back({"LogSoftmax", [](const KernelRequest& r) { return make_softmax(r, true); }});
}

}  // namespace strider::cpu
