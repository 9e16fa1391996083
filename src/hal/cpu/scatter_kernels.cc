// ScatterND, ScatterElements and GatherND on the CPU, over strided views; indices are read at
// run time and checked (an index outside [-dim, dim) fails the run with OUT_OF_RANGE naming
// the node). The scatters copy data into the output, then combine the updates in the order
// they are listed (ops/scatter.h: the rule every device follows).
#include <fmt/format.h>

#include <cstring>

#include "hal/cpu/copy.h"
#include "hal/cpu/cpu_kernels.h"
#include "hal/cpu/dtype_dispatch.h"
#include "hal/cpu/strided_loop.h"
#include "ops/scatter.h"

namespace strider::cpu {
namespace {

using KernelPtr = std::unique_ptr<Kernel>;

// Element offset of `index` (over the first index.size() dims) with `strides` from `first`.
int64_t offset_of(const Shape& index, const Strides& strides, size_t first = 0) {
  int64_t at = 0;
  for (size_t d = 0; d < index.size(); ++d) at += index[d] * strides[first + d];
  return at;
}

Shape dims(const Shape& sizes, size_t from, size_t to) { return Shape(sizes.begin() + from, sizes.begin() + to); }

// The index stored at element `at` of an i64 or i32 view, normalized into [0, dim).
Result<int64_t> read_index(const TensorView& indices, int64_t at, int64_t dim, const std::string& node) {
  const std::byte* p = indices.host_data() + at * dtype_size(indices.dtype);
  int64_t k = indices.dtype == DType::kI64 ? *reinterpret_cast<const int64_t*>(p) : *reinterpret_cast<const int32_t*>(p);
  if (k < -dim || k >= dim) return out_of_range(fmt::format("node '{}': index {} out of range [{}, {})", node, k, -dim, dim));
  return k < 0 ? k + dim : k;
}

struct ScatterOperands {
  TensorView data, indices, updates, out;
  ScatterParams p;
  std::string node;
};

template <typename T>
class ScatterNDKernel final : public Kernel {
 public:
  explicit ScatterNDKernel(ScatterOperands o) : o_(std::move(o)) {}
  Status run(const QueueContext&) override {
    const TensorView &out = o_.out, &ix = o_.indices, &up = o_.updates;
    if (!same_view(out, o_.data)) copy_view(out, o_.data);
    const size_t k = size_t(ix.sizes.back()), q = ix.sizes.size() - 1;
    const Shape tuples = dims(ix.sizes, 0, q), slice = dims(out.sizes, k, out.sizes.size());
    T* dst = out.host_data_as<T>();
    const T* src = up.host_data_as<T>();
    Shape t(q, 0);
    for (int64_t n = 0; n < num_elements(tuples); ++n, advance_index(t, tuples)) {
      int64_t at = 0;
      for (size_t j = 0; j < k; ++j) {
        STRIDER_ASSIGN_OR_RETURN(int64_t i, read_index(ix, offset_of(t, ix.strides) + int64_t(j) * ix.strides[q], out.sizes[j], o_.node));
        at += i * out.strides[j];
      }
      const int64_t from = offset_of(t, up.strides);
      Shape s(slice.size(), 0);
      for (int64_t e = 0; e < num_elements(slice); ++e, advance_index(s, slice)) {
        T& x = dst[at + offset_of(s, out.strides, k)];
        x = store<T>(scatter_combine(o_.p.reduction, load(x), load(src[from + offset_of(s, up.strides, q)])));
      }
    }
    return Status::ok();
  }
  std::string implementation() const override { return "strider:ScatterND"; }

 private:
  ScatterOperands o_;
};

template <typename T>
class ScatterElementsKernel final : public Kernel {
 public:
  explicit ScatterElementsKernel(ScatterOperands o) : o_(std::move(o)) {}
  Status run(const QueueContext&) override {
    const TensorView &out = o_.out, &ix = o_.indices, &up = o_.updates;
    if (!same_view(out, o_.data)) copy_view(out, o_.data);
    const size_t axis = size_t(o_.p.axis);
    T* dst = out.host_data_as<T>();
    const T* src = up.host_data_as<T>();
    Shape p(up.sizes.size(), 0);
    for (int64_t e = 0; e < up.num_elements(); ++e, advance_index(p, up.sizes)) {
      STRIDER_ASSIGN_OR_RETURN(int64_t i, read_index(ix, offset_of(p, ix.strides), out.sizes[axis], o_.node));
      T& x = dst[offset_of(p, out.strides) + (i - p[axis]) * out.strides[axis]];
      x = store<T>(scatter_combine(o_.p.reduction, load(x), load(src[offset_of(p, up.strides)])));
    }
    return Status::ok();
  }
  std::string implementation() const override { return "strider:ScatterElements"; }

 private:
  ScatterOperands o_;
};

Result<KernelPtr> make_scatter(const KernelRequest& r) {
  NodeInputs node(r.graph, r.node);
  const bool elements = r.node.op_type == "ScatterElements";
  STRIDER_ASSIGN_OR_RETURN(ScatterParams p, elements ? resolve_scatter_elements(node) : resolve_scatter_nd(node));
  ScatterOperands o{r.inputs[0], r.inputs[1], r.inputs[2], r.outputs[0], p, r.node.name};
  return dispatch_dtype(o.data.dtype, [&]<typename T>() -> Result<KernelPtr> {
    if constexpr (std::is_same_v<T, bool>) {
      if (p.reduction != ScatterReduction::kNone) return unsupported(fmt::format("{} with a reduction on bool", r.node.op_type));
    }
    if (elements) return KernelPtr(new ScatterElementsKernel<T>(std::move(o)));
    return KernelPtr(new ScatterNDKernel<T>(std::move(o)));
  });
}

// GatherND: out[b..., m..., s...] = data[b..., indices[b..., m..., :], s...].
class GatherNDKernel final : public Kernel {
 public:
  GatherNDKernel(TensorView data, TensorView indices, TensorView out, GatherNDParams p, std::string node)
      : data_(std::move(data)), indices_(std::move(indices)), out_(std::move(out)), p_(p), node_(std::move(node)) {}
  Status run(const QueueContext&) override {
    const size_t b = size_t(p_.batch_dims), k = size_t(p_.k), q = indices_.sizes.size() - 1;
    const Shape tuples = dims(indices_.sizes, 0, q), slice = dims(data_.sizes, b + k, data_.sizes.size());
    const int64_t esize = dtype_size(data_.dtype);
    Shape t(q, 0);
    for (int64_t n = 0; n < num_elements(tuples); ++n, advance_index(t, tuples)) {
      int64_t from = offset_of(dims(t, 0, b), data_.strides);
      for (size_t j = 0; j < k; ++j) {
        int64_t at = offset_of(t, indices_.strides) + int64_t(j) * indices_.strides[q];
        STRIDER_ASSIGN_OR_RETURN(int64_t i, read_index(indices_, at, data_.sizes[b + j], node_));
        from += i * data_.strides[b + j];
      }
      const int64_t to = offset_of(t, out_.strides);
      Shape s(slice.size(), 0);
      for (int64_t e = 0; e < num_elements(slice); ++e, advance_index(s, slice))
        std::memcpy(out_.host_data() + (to + offset_of(s, out_.strides, q)) * esize,
                    data_.host_data() + (from + offset_of(s, data_.strides, b + k)) * esize, size_t(esize));
    }
    return Status::ok();
  }
  std::string implementation() const override { return "strider:GatherND"; }

 private:
  TensorView data_, indices_, out_;
  GatherNDParams p_;
  std::string node_;
};

Result<KernelPtr> make_gather_nd(const KernelRequest& r) {
  STRIDER_ASSIGN_OR_RETURN(GatherNDParams p, resolve_gather_nd(NodeInputs(r.graph, r.node)));
  return KernelPtr(new GatherNDKernel(r.inputs[0], r.inputs[1], r.outputs[0], p, r.node.name));
}

}  // namespace

void register_scatter_kernels(std::vector<KernelEntry>& table) {
  table.push_back({"ScatterND", make_scatter});
  table.push_back({"ScatterElements", make_scatter});
  table.push_back({"GatherND", make_gather_nd});
}

}  // namespace strider::cpu
