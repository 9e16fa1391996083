// Resize (opsets 10-19) and Upsample (7, 9) on the CPU, over views of any strides.
//
// Resize is separable: along each axis, every output coordinate reads a few input
// positions (taps) with weights that depend only on that coordinate. The taps of every
// axis are computed once when the kernel is created (shapes are static); an output element
// is then the sum, over the product of its per-axis taps, of weight products times input
// elements, so run() only gathers. Nearest mode has one tap per axis and becomes a plain
// indexed copy.
//
// The taps are computed by src/ops/resize_taps.h, shared with the CUDA kernel.
//
// Output rows (one index of the outer dims, all of the innermost) split over the session's
// team; each thread keeps its own tap scratch, made when the kernel is, so a run allocates
// nothing. A channels-last nearest upsample is a memcpy of C channels per output pixel.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <numeric>

#include "hal/cpu/cpu_kernels.h"
#include "hal/cpu/dtype_dispatch.h"
#include "hal/cpu/parallel.h"
#include "hal/resize_views.h"
#include "ops/resize_taps.h"

namespace strider::cpu {
namespace {

using KernelPtr = std::unique_ptr<Kernel>;

// Everything run() needs, in loop order: dims sorted so the output's innermost memory
// dimension (of size > 1) is visited last, which makes the NHWC gather a contiguous copy.
struct ResizePlan {
  std::vector<ResizeTaps> taps;        // per loop dim
  std::vector<int64_t> out_sizes;    // per loop dim
  std::vector<int64_t> out_strides;  // per loop dim, elements
  double extrapolation = 0.0;
  bool all_single = true;  // every axis has one tap of weight 1: a pure gather
  bool any_outside = false;
};

Result<ResizePlan> make_plan(const ResizeParams& p, const TensorView& x, const TensorView& y,
                             bool legacy) {
  const size_t rank = size_t(y.rank());
  std::vector<size_t> order(rank);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if ((y.sizes[a] == 1) != (y.sizes[b] == 1)) return y.sizes[a] == 1;
    return std::abs(y.strides[a]) > std::abs(y.strides[b]);
  });
  ResizePlan plan;
  plan.extrapolation = p.extrapolation_value;
  for (size_t d : order) {
    ResizeAxisGeometry g = resize_axis_geometry(p, x.sizes[d], y.sizes[d], d, legacy);
    STRIDER_ASSIGN_OR_RETURN(ResizeTaps taps, resize_axis_taps(p, g, x.strides[d]));
    plan.taps.push_back(std::move(taps));
    plan.out_sizes.push_back(y.sizes[d]);
    plan.out_strides.push_back(y.strides[d]);
    plan.all_single = plan.all_single && plan.taps.back().width == 1;
    for (uint8_t o : plan.taps.back().outside) plan.any_outside = plan.any_outside || o != 0;
  }
  return plan;
}

// The outer loop dims' taps combined for one outer index: one input offset and weight per
// combination, and whether the outer coordinates are extrapolated. The next_* vectors are
// scratch space kept across rows so run() does not allocate per row.
template <typename Acc>
struct OuterTaps {
  std::vector<int64_t> offsets, next_offsets;
  std::vector<Acc> weights, next_weights;
  bool outside = false;
};

template <typename Acc>
void combine_outer(const ResizePlan& plan, const std::vector<int64_t>& index, OuterTaps<Acc>& o) {
  o.offsets.assign(1, 0);
  o.weights.assign(1, Acc(1));
  o.outside = false;
  for (size_t d = 0; d + 1 < plan.taps.size(); ++d) {
    const ResizeTaps& t = plan.taps[d];
    const size_t at = size_t(index[d] * t.width);
    o.outside = o.outside || t.outside[size_t(index[d])] != 0;
    if (t.width == 1) {
      for (int64_t& off : o.offsets) off += t.offsets[at];
      continue;
    }
    o.next_offsets.clear();
    o.next_weights.clear();
    for (size_t c = 0; c < o.offsets.size(); ++c)
      for (size_t k = 0; k < size_t(t.width); ++k) {
        o.next_offsets.push_back(o.offsets[c] + t.offsets[at + k]);
        o.next_weights.push_back(o.weights[c] * Acc(t.weights[at + k]));
      }
    std::swap(o.offsets, o.next_offsets);
    std::swap(o.weights, o.next_weights);
  }
}

template <typename T>
class ResizeKernel final : public Kernel {
  using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

 public:
  ResizeKernel(TensorView x, TensorView y, ResizePlan plan, std::string name)
      : x_(std::move(x)), y_(std::move(y)), plan_(std::move(plan)), name_(std::move(name)) {
    for (const ResizeTaps& t : plan_.taps)
      inner_weights_.push_back(std::vector<Acc>(t.weights.begin(), t.weights.end()));
    // Each thread's scratch at its largest: the outer taps' combinations and one row.
    size_t combinations = 1;
    for (size_t d = 0; d + 1 < plan_.taps.size(); ++d) combinations *= size_t(plan_.taps[d].width);
    scratch_.resize(size_t(max_parallel_threads()));
    for (RowScratch& s : scratch_) {
      for (auto* v : {&s.taps.offsets, &s.taps.next_offsets}) v->reserve(combinations);
      for (auto* v : {&s.taps.weights, &s.taps.next_weights}) v->reserve(combinations);
      s.index.assign(plan_.taps.size() - 1, 0);
      s.row.assign(plan_.all_single ? 0 : size_t(plan_.out_sizes.back()), Acc(0));
    }
  }

  Status run(const QueueContext&) override {
    if (y_.num_elements() == 0) return Status::ok();
    const size_t outer = plan_.taps.size() - 1;
    int64_t rows = 1, taps_per_row = 1;
    for (size_t d = 0; d < outer; ++d) {
      rows *= plan_.out_sizes[d];
      taps_per_row *= plan_.taps[d].width;
    }
    const int64_t row_work = plan_.out_sizes.back() * taps_per_row * plan_.taps.back().width;
    std::atomic<bool> failed{false};
    // Nothing may leave the team's threads by throwing (a tap vector growing past what
    // the constructor reserved could): noted and reported after the team joined.
    parallel_for(rows, row_work, [&](int64_t begin, int64_t end, int thread) {
      try {
        run_rows(begin, end, scratch_[size_t(thread)]);
      } catch (...) {
        failed = true;
      }
    }, int(scratch_.size()));
    if (failed) return resource_exhausted(fmt::format("{}: memory for its taps", name_));
    return Status::ok();
  }

  std::string implementation() const override { return "strider:" + name_; }

 private:
  struct RowScratch {
    OuterTaps<Acc> taps;
    std::vector<int64_t> index;
    std::vector<Acc> row;
  };

  // Output rows [begin, end) of the outer dims' odometer (the last outer dim fastest).
  void run_rows(int64_t begin, int64_t end, RowScratch& s) const {
    const T* in = x_.host_data_as<const T>();
    T* out = y_.host_data_as<T>();
    const size_t outer = plan_.taps.size() - 1;
    for (size_t d = outer, rest = size_t(begin); d > 0; --d) {
      s.index[d - 1] = int64_t(rest % size_t(plan_.out_sizes[d - 1]));
      rest /= size_t(plan_.out_sizes[d - 1]);
    }
    for (int64_t r = begin; r < end; ++r) {
      int64_t out_offset = 0;
      for (size_t d = 0; d < outer; ++d) out_offset += s.index[d] * plan_.out_strides[d];
      combine_outer(plan_, s.index, s.taps);
      if (plan_.all_single)
        gather_row(in, out + out_offset, s.taps);
      else
        interpolate_row(in, out + out_offset, s.taps, s.row);
      for (size_t d = outer; d > 0 && ++s.index[d - 1] == plan_.out_sizes[d - 1]; --d) s.index[d - 1] = 0;
    }
  }

  // One tap per axis: a strided indexed copy (nearest, and axes that are not resized).
  void gather_row(const T* in, T* out, const OuterTaps<Acc>& o) const {
    const ResizeTaps& t = plan_.taps.back();
    const int64_t n = plan_.out_sizes.back(), stride = plan_.out_strides.back();
    const T* src = in + o.offsets[0];
    if (!plan_.any_outside) {
      if (t.identity && stride == 1 && t.in_stride == 1) {
        std::memcpy(out, src, size_t(n) * sizeof(T));
      } else if (t.identity) {
        for (int64_t i = 0; i < n; ++i) out[i * stride] = src[i * t.in_stride];
      } else {
        for (int64_t i = 0; i < n; ++i) out[i * stride] = src[t.offsets[size_t(i)]];
      }
      return;
    }
    const T fill = store<T>(ComputeType<T>(plan_.extrapolation));
    for (int64_t i = 0; i < n; ++i)
      out[i * stride] = o.outside || t.outside[size_t(i)] ? fill : src[t.offsets[size_t(i)]];
  }

  // Adds weight * (the inner axis' interpolation of the row at `src`) to acc, with loops
  // specialized for the common tap counts so they stay simple enough to vectorize.
  void accumulate(const T* src, Acc weight, Acc* acc) const {
    const ResizeTaps& t = plan_.taps.back();
    const int64_t n = plan_.out_sizes.back();
    if (t.identity) {
      for (int64_t i = 0; i < n; ++i) acc[i] += weight * Acc(load(src[i * t.in_stride]));
      return;
    }
    switch (t.width) {
      case 1: return accumulate_taps<1>(src, weight, acc);
      case 2: return accumulate_taps<2>(src, weight, acc);
      case 4: return accumulate_taps<4>(src, weight, acc);
      default: return accumulate_taps<0>(src, weight, acc);
    }
  }

  // kWidth taps per output coordinate (0: the axis' own width).
  template <int kWidth>
  void accumulate_taps(const T* src, Acc weight, Acc* acc) const {
    const Acc* w = inner_weights_.back().data();
    const int64_t* off = plan_.taps.back().offsets.data();
    const int64_t n = plan_.out_sizes.back();
    const int64_t width = kWidth > 0 ? kWidth : plan_.taps.back().width;
    for (int64_t i = 0; i < n; ++i) {
      Acc sum = 0;
      for (int64_t k = i * width; k < (i + 1) * width; ++k) sum += w[k] * Acc(load(src[off[k]]));
      acc[i] += weight * sum;
    }
  }

  void interpolate_row(const T* in, T* out, const OuterTaps<Acc>& o, std::vector<Acc>& acc) const {
    if constexpr (is_float_storage_v<T>) {
      const ResizeTaps& t = plan_.taps.back();
      const int64_t n = plan_.out_sizes.back(), stride = plan_.out_strides.back();
      std::fill(acc.begin(), acc.end(), Acc(0));
      for (size_t c = 0; c < o.offsets.size(); ++c)
        accumulate(in + o.offsets[c], o.weights[c], acc.data());
      if (!plan_.any_outside) {
        for (int64_t i = 0; i < n; ++i) out[i * stride] = store<T>(acc[size_t(i)]);
        return;
      }
      const Acc fill = Acc(plan_.extrapolation);
      for (int64_t i = 0; i < n; ++i)
        out[i * stride] = store<T>(o.outside || t.outside[size_t(i)] ? fill : acc[size_t(i)]);
    }
  }

  TensorView x_, y_;
  ResizePlan plan_;
  std::vector<std::vector<Acc>> inner_weights_;
  std::vector<RowScratch> scratch_;  // one per thread of the session's team
  std::string name_;
};

std::string_view mode_name(ResizeMode mode) {
  switch (mode) {
    case ResizeMode::kNearest: return "nearest";
    case ResizeMode::kLinear: return "linear";
    case ResizeMode::kCubic: return "cubic";
  }
  return "?";
}

// The shared checks, and host access: this kernel reads and writes through host pointers.
Status check_views(const KernelRequest& r, const ResizeParams& p) {
  STRIDER_RETURN_IF_ERROR(check_resize_views(r, p));
  if (!r.inputs[0].allocation->host_accessible() || !r.outputs[0].allocation->host_accessible())
    return invalid_argument("Resize on the CPU needs host-accessible views");
  return Status::ok();
}

Result<KernelPtr> make_resize_kernel(const KernelRequest& r) {
  STRIDER_ASSIGN_OR_RETURN(ResizeParams p, resolve_resize(NodeInputs(r.graph, r.node)));
  STRIDER_RETURN_IF_ERROR(check_views(r, p));
  const TensorView& x = r.inputs[0];
  const TensorView& y = r.outputs[0];
  const bool nearest = p.mode == ResizeMode::kNearest;
  const bool legacy = resize_legacy_nearest(p, r.node);
  const std::string name = fmt::format("resize_{}", mode_name(p.mode));
  return dispatch_dtype(x.dtype, [&]<typename T>() -> Result<KernelPtr> {
    // Only nearest is a pure gather; interpolating integers is not supported.
    if (!is_float_storage_v<T> && !nearest)
      return unsupported(fmt::format("{} mode '{}' on {}", r.node.op_type, mode_name(p.mode),
                                     dtype_name(x.dtype)));
    STRIDER_ASSIGN_OR_RETURN(ResizePlan plan, make_plan(p, x, y, legacy));
    return KernelPtr(new ResizeKernel<T>(x, y, std::move(plan), name));
  });
}

}  // namespace

void register_resize_kernels(std::vector<KernelEntry>& table) {
  table.push_back({"Resize", make_resize_kernel});
  table.push_back({"Upsample", make_resize_kernel});
}

}  // namespace strider::cpu
