// Pooling: MaxPool (with its optional Indices output), AveragePool, GlobalAveragePool,
// GlobalMaxPool over 1-3 spatial dims, any strides, accumulating in f32 (f64 for f64).
#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <unordered_map>

#include "base/cache_aligned.h"
#include "hal/cpu/cpu_kernels.h"
#include "hal/cpu/dtype_dispatch.h"
#include "hal/cpu/onednn.h"
#include "hal/cpu/worker_queue.h"
#include "hal/cpu/parallel.h"
#include "hal/cpu/strided_loop.h"
#include "ops/shape_ops.h"
#include "ops/window_taps.h"

namespace strider::cpu {
namespace {

using KernelPtr = std::unique_ptr<Kernel>;

enum class PoolKind { kMax, kAverage };

struct PoolSetup {
  PoolKind kind = PoolKind::kMax;
  WindowGeometry window;
  bool count_include_pad = false;
  bool column_major_indices = false;  // MaxPool storage_order = 1
};

template <typename T>
class PoolKernel final : public Kernel {
  using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

 public:
  PoolKernel(TensorView x, TensorView y, TensorView indices, PoolSetup setup)
      : x_(std::move(x)), y_(std::move(y)), indices_(std::move(indices)), s_(std::move(setup)) {}

  Status run(const QueueContext& context) override {
    Shape out_spatial(y_.sizes.begin() + 2, y_.sizes.end());
    const int64_t positions = num_elements(out_spatial);
    for (int64_t n = 0; n < y_.sizes[0]; ++n)
      for (int64_t c = 0; c < y_.sizes[1]; ++c) {
        Shape o(out_spatial.size(), 0);
        for (int64_t p = 0; p < positions; ++p, advance_index(o, out_spatial)) pool_one(n, c, o);
      }
    return Status::ok();
  }
  std::string implementation() const override {
    return s_.kind == PoolKind::kMax ? "strider:maxpool" : "strider:avgpool";
  }

 private:
  void pool_one(int64_t n, int64_t c, const Shape& o) {
    const WindowGeometry& g = s_.window;
    const size_t spatial = o.size();
    // A window wholly in the padding has no tap: its max is the lowest value of T (for
    // 8-bit integers -inf would not convert).
    Acc lowest = std::is_integral_v<T> ? Acc(std::numeric_limits<T>::lowest()) : -std::numeric_limits<Acc>::infinity();
    Acc acc = s_.kind == PoolKind::kMax ? lowest : Acc(0);
    int64_t best_index = -1, valid = 0, padded = 1;
    // The window along each dim, clipped to the padded input for the padded count.
    for (size_t d = 0; d < spatial; ++d) {
      int64_t start = o[d] * g.strides[d] - g.pads_begin[d];
      int64_t end = std::min(start + (g.kernel[d] - 1) * g.dilations[d] + 1,
                             x_.sizes[d + 2] + g.pads_end[d]);
      padded *= (end - start + g.dilations[d] - 1) / g.dilations[d];
    }
    // Only the taps inside the input (ops/window_taps.h), in row-major order of k.
    // Per-output scratch lives in the kernel (a run is single-threaded): no allocation per
    // output position.
    Shape& first = first_;
    Shape& end = end_;
    Shape& k = k_;
    first.resize(spatial), end.resize(spatial), k.resize(spatial);
    bool any_tap = true;
    for (size_t d = 0; d < spatial; ++d) {
      TapRange r = taps_inside(o[d] * g.strides[d] - g.pads_begin[d], g.dilations[d], g.kernel[d], x_.sizes[d + 2]);
      any_tap = any_tap && r.end > r.first;
      first[d] = k[d] = r.first;
      end[d] = r.end;
    }
    for (bool more = any_tap; more;) {
      int64_t offset = n * x_.strides[0] + c * x_.strides[1];
      int64_t flat = 0, column_flat = 0, column_scale = 1;
      for (size_t d = 0; d < spatial; ++d) {
        int64_t pos = o[d] * g.strides[d] + k[d] * g.dilations[d] - g.pads_begin[d];
        offset += pos * x_.strides[d + 2];
        flat = flat * x_.sizes[d + 2] + pos;
        column_flat += pos * column_scale;
        column_scale *= x_.sizes[d + 2];
      }
      Acc v = Acc(load(x_.host_data_as<T>()[offset]));
      ++valid;
      if (s_.kind == PoolKind::kAverage) {
        acc += v;
      } else if (v > acc || best_index < 0) {
        acc = v;
        best_index = s_.column_major_indices ? column_flat : flat;
      }
      more = false;
      for (size_t d = spatial; d-- > 0;) {  // next k, last axis fastest
        if (++k[d] < end[d]) {
          more = true;
          break;
        }
        k[d] = first[d];
      }
    }
    if (s_.kind == PoolKind::kAverage) {
      int64_t divisor = s_.count_include_pad ? padded : valid;
      acc = divisor > 0 ? acc / Acc(divisor) : Acc(0);
    }
    int64_t y_offset = n * y_.strides[0] + c * y_.strides[1];
    for (size_t d = 0; d < spatial; ++d) y_offset += o[d] * y_.strides[d + 2];
    y_.host_data_as<T>()[y_offset] = store<T>(ComputeType<T>(acc));
    if (indices_.allocation) {
      int64_t plane = num_elements(std::span(x_.sizes).subspan(2));
      int64_t i_offset = n * indices_.strides[0] + c * indices_.strides[1];
      for (size_t d = 0; d < spatial; ++d) i_offset += o[d] * indices_.strides[d + 2];
      indices_.host_data_as<int64_t>()[i_offset] = (n * x_.sizes[1] + c) * plane + best_index;
    }
  }

  TensorView x_, y_, indices_;
  PoolSetup s_;
  Shape first_, end_, k_;  // the current window's tap ranges and tap
};

// Pooling over views whose channels are dense (channels-last, or a channel slice of a
// channels-last concat, which oneDNN's pooling reads only with its reference loop): each tap
// of a window is one vectorizable pass over the channels, into a per-thread row of
// accumulators. Output positions are independent, so they are split over the threads.
template <typename T>
class ChannelsInnerPool final : public Kernel {
  using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

 public:
  ChannelsInnerPool(TensorView x, TensorView y, PoolSetup setup)
      : x_(std::move(x)), y_(std::move(y)), s_(std::move(setup)), threads_(max_parallel_threads()),
        rows_(size_t(threads_) * cache_lines_of<Acc>(size_t(y_.sizes[1]))) {}

  Status run(const QueueContext&) override {
    const Shape out_spatial(y_.sizes.begin() + 2, y_.sizes.end());
    const int64_t positions = num_elements(out_spatial), channels = y_.sizes[1];
    int64_t taps = 1;
    for (int64_t k : s_.window.kernel) taps *= k;
    parallel_for(y_.sizes[0] * positions, channels * taps, [&](int64_t begin, int64_t end, int thread) {
      Acc* acc = rows_.data() + size_t(thread) * cache_lines_of<Acc>(size_t(channels));
      Shape o = unflatten_index(begin % positions, out_spatial);
      for (int64_t item = begin; item < end; ++item, advance_index(o, out_spatial))
        pool_position(item / positions, o, acc);
    }, threads_);
    return Status::ok();
  }
  std::string implementation() const override {
    return s_.kind == PoolKind::kMax ? "strider:maxpool-channels-inner" : "strider:avgpool-channels-inner";
  }

 private:
  void pool_position(int64_t n, const Shape& o, Acc* acc) const {
    const WindowGeometry& g = s_.window;
    const size_t spatial = o.size();
    const int64_t channels = y_.sizes[1];
    const bool max = s_.kind == PoolKind::kMax;
    const Acc start_value = max ? -std::numeric_limits<Acc>::infinity() : Acc(0);
    for (int64_t c = 0; c < channels; ++c) acc[c] = start_value;
    std::array<int64_t, 3> first{}, end{}, k{};
    int64_t valid = 1, padded = 1;
    bool any_tap = true;
    for (size_t d = 0; d < spatial; ++d) {
      const int64_t start = o[d] * g.strides[d] - g.pads_begin[d];
      TapRange r = taps_inside(start, g.dilations[d], g.kernel[d], x_.sizes[d + 2]);
      first[d] = k[d] = r.first;
      end[d] = r.end;
      any_tap = any_tap && r.end > r.first;
      valid *= r.end - r.first;
      int64_t reach = std::min(start + (g.kernel[d] - 1) * g.dilations[d] + 1, x_.sizes[d + 2] + g.pads_end[d]);
      padded *= (reach - start + g.dilations[d] - 1) / g.dilations[d];
    }
    const T* x = x_.host_data_as<T>() + n * x_.strides[0];
    for (bool more = any_tap; more;) {
      const T* tap = x;
      for (size_t d = 0; d < spatial; ++d)
        tap += (o[d] * g.strides[d] + k[d] * g.dilations[d] - g.pads_begin[d]) * x_.strides[d + 2];
      if (max)
        for (int64_t c = 0; c < channels; ++c) acc[c] = std::max(acc[c], Acc(load(tap[c])));
      else
        for (int64_t c = 0; c < channels; ++c) acc[c] += Acc(load(tap[c]));
      more = false;
      for (size_t d = spatial; d-- > 0;) {  // next tap, last axis fastest
        if (++k[d] < end[d]) {
          more = true;
          break;
        }
        k[d] = first[d];
      }
    }
    T* y = y_.host_data_as<T>() + n * y_.strides[0];
    for (size_t d = 0; d < spatial; ++d) y += o[d] * y_.strides[d + 2];
    if (max) {
      for (int64_t c = 0; c < channels; ++c) y[c] = store<T>(ComputeType<T>(acc[c]));
      return;
    }
    const int64_t divisor = any_tap ? (s_.count_include_pad ? padded : valid) : 0;
    const Acc scale = divisor > 0 ? Acc(1) / Acc(divisor) : Acc(0);
    for (int64_t c = 0; c < channels; ++c) y[c] = store<T>(ComputeType<T>(acc[c] * scale));
  }

  TensorView x_, y_;
  PoolSetup s_;
  int threads_;
  CacheAlignedVector<Acc> rows_;  // per thread, one accumulator per channel (in whole cache lines)
};

// f32 and bf16 pooling without an Indices output on oneDNN's pooling, over the views' own
// strides. The right padding is what makes oneDNN's output size the planned one (ceil_mode
// windows may reach past the declared pads); an average over such a window would count the
// extra positions differently from ONNX, so only max pooling takes that case.
class OneDnnPool final : public Kernel {
 public:
  Status init(const TensorView& x, const TensorView& y, const PoolSetup& s, const std::string& node) {
    return onednn_call(node, [&] {
      // Under strider's own team made for one thread (onednn_team_for), as every primitive.
      ScopedOmpThreads team(own_team_enabled() ? 1 : 0);
      const WindowGeometry& g = s.window;
      dnnl::memory::dims strides(g.strides.begin(), g.strides.end()), kernel(g.kernel.begin(), g.kernel.end());
      dnnl::memory::dims dilations, pad_l(g.pads_begin.begin(), g.pads_begin.end()), pad_r;
      for (size_t d = 0; d < g.kernel.size(); ++d) {
        // oneDNN walks every declared tap, inside the input or not; ours visit only the taps
        // inside (at most the input's extent). A hostile MaxPool of 3221225472 x 3 taps over
        // an 8 x 8 input (SAME_UPPER) ran for minutes in oneDNN (the fuzzer, session 43).
        if (g.kernel[d] > x.sizes[d + 2]) throw dnnl::error(dnnl_unimplemented, "a window wider than the input");
        dilations.push_back(g.dilations[d] - 1);
        int64_t reach = (y.sizes[d + 2] - 1) * g.strides[d] + (g.kernel[d] - 1) * g.dilations[d] + 1;
        pad_r.push_back(reach - x.sizes[d + 2] - g.pads_begin[d]);
        if (s.kind == PoolKind::kAverage && pad_r.back() != g.pads_end[d])
          throw dnnl::error(dnnl_unimplemented, "an average window past the declared padding");
        if (pad_r.back() < 0) pad_r.back() = 0;
        // A window wholly in the padding has no tap (ours gives -inf or 0): oneDNN's would not.
        for (int64_t o = 0; o < y.sizes[d + 2]; ++o) {
          TapRange taps = taps_inside(o * g.strides[d] - g.pads_begin[d], g.dilations[d], g.kernel[d], x.sizes[d + 2]);
          if (taps.end <= taps.first) throw dnnl::error(dnnl_unimplemented, "a window with no tap");
        }
      }
      auto algo = s.kind == PoolKind::kMax ? dnnl::algorithm::pooling_max
                  : s.count_include_pad    ? dnnl::algorithm::pooling_avg_include_padding
                                           : dnnl::algorithm::pooling_avg_exclude_padding;
      auto x_md = onednn_desc(x), y_md = onednn_desc(y);
      dnnl::pooling_v2_forward::desc desc(dnnl::prop_kind::forward_inference, algo, x_md, y_md, strides, kernel,
                                           dilations, pad_l, pad_r);
      dnnl::pooling_v2_forward::primitive_desc pd(desc, onednn_attr(), onednn_engine());
      impl_ = onednn_impl_name(pd);
      primitive_ = dnnl::pooling_v2_forward(pd);
      team_ = onednn_creates_team();
      args_ = {{DNNL_ARG_SRC, onednn_memory(x, x_md)},
               {DNNL_ARG_DST, onednn_memory(y, y_md)},
               {DNNL_ARG_SCRATCHPAD, dnnl::memory(pd.scratchpad_desc(), onednn_engine())}};
    });
  }
  Status run(const QueueContext&) override {
    return onednn_call("Pool", [&] { onednn_execute(primitive_, args_, team_); });
  }
  std::string implementation() const override { return impl_; }

 private:
  dnnl::pooling_v2_forward primitive_;
  std::unordered_map<int, dnnl::memory> args_;
  bool team_ = false;  // created for a team of two or more
  std::string impl_;
};

// oneDNN's pooling when it has a fast one for these views (not its reference loop, which is
// slower than ours), else nullopt.
std::optional<KernelPtr> onednn_pool(const KernelRequest& r, const PoolSetup& setup, const TensorView& indices) {
  const TensorView &x = r.inputs[0], &y = r.outputs[0];
  if (indices.allocation || (x.dtype != DType::kF32 && x.dtype != DType::kBF16) || x.rank() < 3 || x.rank() > 5)
    return std::nullopt;
  auto kernel = std::make_unique<OneDnnPool>();
  if (!kernel->init(x, y, setup, r.node.name).is_ok() || kernel->implementation().find("ref") != std::string::npos)
    return std::nullopt;
  return KernelPtr(std::move(kernel));
}

// The channels-inner kernel for float views with dense channels and at most 3 spatial dims.
std::optional<KernelPtr> channels_inner_pool(const KernelRequest& r, const PoolSetup& setup,
                                             const TensorView& indices) {
  const TensorView &x = r.inputs[0], &y = r.outputs[0];
  if (indices.allocation || x.rank() < 3 || x.rank() > 5 || x.strides[1] != 1 || y.strides[1] != 1)
    return std::nullopt;
  return dispatch_dtype(x.dtype, [&]<typename T>() -> std::optional<KernelPtr> {
    if constexpr (is_float_storage_v<T>) return KernelPtr(new ChannelsInnerPool<T>(x, y, setup));
    else return std::nullopt;
  });
}

Result<KernelPtr> make_pool_kernel(const KernelRequest& r, PoolSetup setup, TensorView indices) {
  if (std::optional<KernelPtr> fast = onednn_pool(r, setup, indices)) return std::move(*fast);
  if (std::optional<KernelPtr> fast = channels_inner_pool(r, setup, indices)) return std::move(*fast);
  return dispatch_dtype(r.inputs[0].dtype, [&]<typename T>() -> Result<KernelPtr> {
    constexpr bool kByte = std::is_same_v<T, int8_t> || std::is_same_v<T, uint8_t>;
    if constexpr (is_float_storage_v<T> || kByte) {
      if (kByte && setup.kind != PoolKind::kMax)
        return unsupported(fmt::format("{} on {}", r.node.op_type, dtype_name(r.inputs[0].dtype)));
      return KernelPtr(new PoolKernel<T>(r.inputs[0], r.outputs[0], indices, std::move(setup)));
    } else {
      return unsupported(fmt::format("{} on {}", r.node.op_type, dtype_name(r.inputs[0].dtype)));
    }
  });
}

Result<KernelPtr> make_window_pool(const KernelRequest& r, PoolKind kind) {
  NodeInputs node(r.graph, r.node);
  const AttributeMap& a = r.node.attributes;
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, a.require_ints("kernel_shape"));
  STRIDER_ASSIGN_OR_RETURN(int64_t ceil_mode, a.get_int("ceil_mode", 0));
  STRIDER_ASSIGN_OR_RETURN(int64_t include_pad, a.get_int("count_include_pad", 0));
  STRIDER_ASSIGN_OR_RETURN(int64_t storage_order, a.get_int("storage_order", 0));
  PoolSetup setup;
  setup.kind = kind;
  setup.count_include_pad = include_pad != 0;
  setup.column_major_indices = storage_order != 0;
  std::span<const int64_t> spatial(r.inputs[0].sizes.begin() + 2, r.inputs[0].sizes.end());
  STRIDER_ASSIGN_OR_RETURN(setup.window, resolve_window(node, spatial, kernel, ceil_mode != 0));
  TensorView indices = r.outputs.size() > 1 ? r.outputs[1] : TensorView{};
  return make_pool_kernel(r, std::move(setup), indices);
}

// A global pool is a window pool whose window is the whole spatial extent.
Result<KernelPtr> make_global_pool(const KernelRequest& r, PoolKind kind) {
  PoolSetup setup;
  setup.kind = kind;
  size_t spatial = size_t(r.inputs[0].rank() - 2);
  setup.window.kernel.assign(r.inputs[0].sizes.begin() + 2, r.inputs[0].sizes.end());
  setup.window.strides.assign(spatial, 1);
  setup.window.dilations.assign(spatial, 1);
  setup.window.pads_begin.assign(spatial, 0);
  setup.window.pads_end.assign(spatial, 0);
  setup.window.output.assign(spatial, 1);
  return make_pool_kernel(r, std::move(setup), TensorView{});
}

}  // namespace

void register_pool_kernels(std::vector<KernelEntry>& table) {
  table.push_back({"MaxPool", [](const KernelRequest& r) { return make_window_pool(r, PoolKind::kMax); }});
  table.push_back({"AveragePool", [](const KernelRequest& r) { return make_window_pool(r, PoolKind::kAverage); }});
  table.push_back({"GlobalMaxPool", [](const KernelRequest& r) { return make_global_pool(r, PoolKind::kMax); }});
  table.push_back({"GlobalAveragePool", [](const KernelRequest& r) { return make_global_pool(r, PoolKind::kAverage); }});
}

}  // namespace strider::cpu
