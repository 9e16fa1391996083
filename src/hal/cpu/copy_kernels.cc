// Data-movement kernels. Each op is a view of its input (or, for Concat, of its output;
// ops/view_ops.h computes both, for the planner too) followed by strided copies: Split, Slice, Concat, Transpose, Expand, Reshape and its
// relatives, Gather; and Cast, a converting copy.
#include <cmath>
#include <cstring>
#include <limits>

#include "base/cache_aligned.h"
#include "hal/cpu/copy.h"
#include "base/checked_math.h"
#include "base/small_types.h"
#include "hal/cpu/cpu_kernels.h"
#include "hal/cpu/strided_loop.h"
#include "hal/cpu/map_kernel.h"
#include "ops/shape_ops.h"
#include "ops/view_ops.h"

namespace strider::cpu {
namespace {

using KernelPtr = std::unique_ptr<Kernel>;

// Runs a fixed list of (destination, source) view copies.
class CopyKernel final : public Kernel {
 public:
  // Pairs whose source already is the destination (a part the planner placed in its
  // concat slice, an output that is a view of its input) are dropped: nothing to move.
  CopyKernel(std::string name, std::vector<std::pair<TensorView, TensorView>> copies) : name_(std::move(name)) {
    for (auto& [dst, src] : copies)
      if (!same_view(dst, src)) copies_.emplace_back(std::move(dst), std::move(src));
  }
  Status run(const QueueContext& context) override {
    for (const auto& [dst, src] : copies_) copy_view(dst, src);
    return Status::ok();
  }
  std::string implementation() const override { return "strider:copy:" + name_; }

 private:
  std::string name_;
  std::vector<std::pair<TensorView, TensorView>> copies_;
};

KernelPtr single_copy(const KernelRequest& r, TensorView src) {
  return KernelPtr(new CopyKernel(r.node.op_type, {{r.outputs[0], std::move(src)}}));
}

// A row-major reshuffle between two views whose strides admit no common shape: gathers
// the input into dense scratch memory owned by the kernel, then scatters it.
class StagedCopyKernel final : public Kernel {
 public:
  StagedCopyKernel(std::string name, TensorView in, TensorView out)
      : name_(std::move(name)), in_(std::move(in)), out_(std::move(out)),
        scratch_(size_t(in_.num_elements() * dtype_size(in_.dtype))),
        scratch_allocation_(0, "scratch", "cpu", scratch_.data(), int64_t(scratch_.size()), 1,
                            StorageMode::kHost, true) {}
  Status run(const QueueContext& context) override {
    STRIDER_ASSIGN_OR_RETURN(TensorView dense_in, make_dense_view(scratch_allocation_, 0, in_.dtype, in_.sizes, "scratch"));
    STRIDER_ASSIGN_OR_RETURN(TensorView dense_out, make_dense_view(scratch_allocation_, 0, out_.dtype, out_.sizes, "scratch"));
    copy_view(dense_in, in_);
    copy_view(out_, dense_out);
    return Status::ok();
  }
  std::string implementation() const override { return "strider:staged-copy:" + name_; }

 private:
  std::string name_;
  TensorView in_, out_;
  CacheAlignedVector<std::byte> scratch_;
  Allocation scratch_allocation_;
};

// Materialize: the same elements in row-major order, into bytes of the output's own.
Result<KernelPtr> make_materialize(const KernelRequest& r) {
  const TensorView& in = r.inputs[0];
  const TensorView& out = r.outputs[0];
  if (auto src = reshape_view(in, out.sizes)) return single_copy(r, *src);
  if (auto dst = reshape_view(out, in.sizes))
    return KernelPtr(new CopyKernel(r.node.op_type, {{*dst, in}}));
  return KernelPtr(new StagedCopyKernel(r.node.op_type, in, out));
}

// A view op (Reshape and its relatives, Transpose, Slice, Split, Expand) whose outputs the
// planner gave bytes of their own: each present output is copied from the view of the
// input it is (ops/view_ops.h). A reshape whose strides admit no view is staged.
Result<KernelPtr> make_view_copy(const KernelRequest& r) {
  NodeInputs node(r.graph, r.node);
  std::vector<std::pair<TensorView, TensorView>> copies;
  for (size_t i = 0; i < r.outputs.size(); ++i) {
    // Outputs that are constants (Dropout's all-true mask) are no views of the input.
    if (!r.outputs[i].allocation || r.graph.value(r.node.outputs[i]).is_constant()) continue;
    STRIDER_ASSIGN_OR_RETURN(std::optional<TensorView> src, output_view(node, i, r.inputs[0]));
    if (!src) return make_materialize(r);
    copies.emplace_back(r.outputs[i], std::move(*src));
  }
  return KernelPtr(new CopyKernel(r.node.op_type, std::move(copies)));
}

Result<KernelPtr> make_concat(const KernelRequest& r) {
  NodeInputs node(r.graph, r.node);
  std::vector<std::pair<TensorView, TensorView>> copies;
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    STRIDER_ASSIGN_OR_RETURN(TensorView part, concat_part_view(node, i, r.outputs[0]));
    copies.emplace_back(std::move(part), r.inputs[i]);
  }
  return KernelPtr(new CopyKernel("Concat", std::move(copies)));
}

// Gather: out[pre..., j..., post...] = data[pre..., indices[j...], post...]. Indices are
// read at run time and checked against the axis, negative ones counting from the end.
class GatherKernel final : public Kernel {
 public:
  GatherKernel(TensorView data, TensorView indices, TensorView out, int64_t axis, std::string node)
      : data_(std::move(data)), indices_(std::move(indices)), out_(std::move(out)), axis_(axis),
        node_(std::move(node)) {
    // Sizes and strides of one gathered slice: the data dims without `axis`.
    for (int64_t d = 0; d < data_.rank(); ++d) {
      if (d == axis_) continue;
      slice_sizes_.push_back(data_.sizes[size_t(d)]);
      data_strides_.push_back(data_.strides[size_t(d)]);
      int64_t out_dim = d < axis_ ? d : d - 1 + indices_.rank();
      out_strides_.push_back(out_.strides[size_t(out_dim)]);
    }
  }

  Status run(const QueueContext& context) override {
    int64_t dim = data_.sizes[size_t(axis_)];
    int64_t esize = dtype_size(data_.dtype);
    Shape index(size_t(indices_.rank()), 0);
    for (int64_t j = 0; j < indices_.num_elements(); ++j) {
      int64_t in_offset = 0, out_offset = 0;
      for (size_t t = 0; t < index.size(); ++t) {
        in_offset += index[t] * indices_.strides[t];
        out_offset += index[t] * out_.strides[size_t(axis_) + t];
      }
      const std::byte* p = indices_.host_data() + in_offset * dtype_size(indices_.dtype);
      int64_t k = indices_.dtype == DType::kI64 ? *reinterpret_cast<const int64_t*>(p)
                                                : *reinterpret_cast<const int32_t*>(p);
      if (k < -dim || k >= dim)
        return out_of_range(fmt::format("node '{}': index {} out of range [{}, {})", node_, k, -dim, dim));
      if (k < 0) k += dim;
      copy_strided(slice_sizes_, out_.host_data() + out_offset * esize, out_strides_.data(),
                   data_.host_data() + k * data_.strides[size_t(axis_)] * esize,
                   data_strides_.data(), esize);
      advance_index(index, indices_.sizes);
    }
    return Status::ok();
  }
  std::string implementation() const override { return "strider:Gather"; }

 private:
  TensorView data_, indices_, out_;
  int64_t axis_;
  std::string node_;
  Shape slice_sizes_;
  Strides data_strides_, out_strides_;
};

Result<KernelPtr> make_gather(const KernelRequest& r) {
  STRIDER_ASSIGN_OR_RETURN(int64_t axis, r.node.attributes.get_int("axis", 0));
  if (axis < 0) axis += r.inputs[0].rank();
  if (r.inputs[1].dtype != DType::kI64 && r.inputs[1].dtype != DType::kI32)
    return unsupported(fmt::format("Gather indices of dtype {}", dtype_name(r.inputs[1].dtype)));
  return KernelPtr(new GatherKernel(r.inputs[0], r.inputs[1], r.outputs[0], axis, r.node.name));
}

// GatherElements: out[p] = data[p with its axis coordinate replaced by indices[p]], for
// every position p of the output (the indices' shape); indices are read at run time.
class GatherElementsKernel final : public Kernel {
 public:
  GatherElementsKernel(TensorView data, TensorView indices, TensorView out, int64_t axis, std::string node)
      : data_(std::move(data)), indices_(std::move(indices)), out_(std::move(out)), axis_(axis), node_(std::move(node)) {}

  Status run(const QueueContext&) override {
    const int64_t dim = data_.sizes[size_t(axis_)], esize = dtype_size(data_.dtype);
    Shape index(out_.sizes.size(), 0);
    for (int64_t e = 0; e < out_.num_elements(); ++e, advance_index(index, out_.sizes)) {
      int64_t at_index = 0, at_out = 0, at_data = 0;
      for (size_t d = 0; d < index.size(); ++d) {
        at_index += index[d] * indices_.strides[d];
        at_out += index[d] * out_.strides[d];
        if (int64_t(d) != axis_) at_data += index[d] * data_.strides[d];
      }
      const std::byte* p = indices_.host_data() + at_index * dtype_size(indices_.dtype);
      int64_t k = indices_.dtype == DType::kI64 ? *reinterpret_cast<const int64_t*>(p) : *reinterpret_cast<const int32_t*>(p);
      if (k < -dim || k >= dim)
        return out_of_range(fmt::format("node '{}': index {} out of range [{}, {})", node_, k, -dim, dim));
      if (k < 0) k += dim;
      at_data += k * data_.strides[size_t(axis_)];
      std::memcpy(out_.host_data() + at_out * esize, data_.host_data() + at_data * esize, size_t(esize));
    }
    return Status::ok();
  }
  std::string implementation() const override { return "strider:GatherElements"; }

 private:
  TensorView data_, indices_, out_;
  int64_t axis_;
  std::string node_;
};

Result<KernelPtr> make_gather_elements(const KernelRequest& r) {
  STRIDER_ASSIGN_OR_RETURN(int64_t axis, resolve_gather_elements_axis(NodeInputs(r.graph, r.node)));
  return KernelPtr(new GatherElementsKernel(r.inputs[0], r.inputs[1], r.outputs[0], axis, r.node.name));
}

// Cast: float to integer truncates toward zero; NaN becomes 0 and out-of-range values
// saturate (ONNX leaves them undefined; C++ would make them undefined behaviour).
template <typename TOut>
struct CastTo {
  template <class C>
  ComputeType<TOut> operator()(C x) const {
    using R = ComputeType<TOut>;
    if constexpr (std::is_same_v<R, bool>) {
      return x != C(0);
    } else if constexpr (std::is_integral_v<R> && !std::is_integral_v<C>) {
      return saturate_to_int<R>(x);
    } else {
      return R(x);
    }
  }
};

// Cast to or from a storage-only type (base/small_types.h), each element through a double:
// every value of every type converts exactly to double but the widest integers, whose
// conversion to a small type wraps or saturates anyway.
Result<KernelPtr> make_small_type_cast(const KernelRequest& r, bool saturate) {
  const TensorView& in = r.inputs[0];
  const TensorView& out = r.outputs[0];
  const DType from = in.dtype, to = out.dtype;
  if (is_small_type(to)) {
    // Integer to 4- or 2-bit integer wraps: only the low byte counts, taken before the
    // double (which drops the low bits of integers beyond 2^53).
    const bool wrap = is_integral(from) && is_integral(to);
    return dispatch_dtype(from, [&]<typename TIn>() -> Result<KernelPtr> {
      return make_map_kernel<uint8_t, TIn>("Cast", out, {in}, [from, to, saturate, wrap](ComputeType<TIn> x) {
        double v = is_small_type(from) ? small_type_to_double(uint8_t(x), from) : double(x);
        if constexpr (std::is_integral_v<ComputeType<TIn>>) {
          if (wrap) v = double((is_small_type(from) ? int64_t(v) : int64_t(x)) & 0xff);
        } else {
          (void)wrap;  // float sources never wrap (clang: a capture unused in this instantiation)
        }
        return small_type_from_double(v, to, saturate);
      });
    });
  }
  // From a 4- or 2-bit integer the value is an integer: cast as one, so that a negative one
  // wraps into an unsigned type as every integer cast does (through the double it saturated
  // to 0: i4 -1 to u8 gave 0, not 255).
  const bool integer = is_integral(from);
  return dispatch_dtype(to, [&]<typename TOut>() -> Result<KernelPtr> {
    return make_map_kernel<TOut, uint8_t>("Cast", out, {in}, [from, integer](uint8_t x) {
      const double v = small_type_to_double(x, from);
      return integer ? CastTo<TOut>{}(int64_t(v)) : CastTo<TOut>{}(v);
    });
  });
}

Result<KernelPtr> make_cast(const KernelRequest& r) {
  const TensorView& in = r.inputs[0];
  const TensorView& out = r.outputs[0];
  if (in.dtype == out.dtype) return single_copy(r, in);
  if (is_small_type(in.dtype) || is_small_type(out.dtype)) {
    STRIDER_ASSIGN_OR_RETURN(int64_t saturate, r.node.attributes.get_int("saturate", 1));
    return make_small_type_cast(r, saturate != 0);
  }
  return dispatch_dtype(out.dtype, [&]<typename TOut>() -> Result<KernelPtr> {
    return dispatch_dtype(in.dtype, [&]<typename TIn>() -> Result<KernelPtr> {
      return make_map_kernel<TOut, TIn>("Cast", out, {in}, CastTo<TOut>{});
    });
  });
}

}  // namespace

void register_copy_kernels(std::vector<KernelEntry>& table) {
  for (std::string_view op : {"Identity", "Dropout", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Slice", "Split",
                              "Expand"})
    table.push_back({op, make_view_copy});
  table.push_back({"Materialize", make_materialize});
  table.push_back({"Concat", make_concat});
  table.push_back({"Gather", make_gather});
  table.push_back({"GatherElements", make_gather_elements});
  table.push_back({"Cast", make_cast});
  table.push_back({"CastLike", make_cast});
}

}  // namespace strider::cpu
