// Conv (1-D, 2-D, 3-D; groups, dilations, strides, pads, auto_pad) and
// BatchNormalization. Conv runs on oneDNN for f32 and bf16 with descriptors built from the
// views' real strides; constant weights are reordered once, at creation, into the layout
// oneDNN prefers. Other dtypes run a naive direct convolution.
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string_view>

#include "hal/cpu/cpu_kernels.h"
#include "hal/cpu/dtype_dispatch.h"
#include "hal/cpu/epilogue.h"
#include "hal/cpu/strided_loop.h"
#include "hal/cpu/matmul.h"
#include "hal/cpu/onednn.h"
#include "hal/cpu/onednn_conv.h"
#include "hal/cpu/parallel.h"
#include "hal/cpu/staged_output.h"
#include "hal/cpu/winograd_conv.h"
#include "hal/cpu/worker_queue.h"
#include "ops/shape_ops.h"

namespace strider::cpu {
namespace {

using KernelPtr = std::unique_ptr<Kernel>;

}  // namespace

Result<ConvSetup> resolve_conv(const KernelRequest& r) {
  ConvSetup c;
  c.x = r.inputs[0];
  c.w = r.inputs[1];
  if (r.has_input(2)) c.bias = r.inputs[2];
  c.y = r.outputs[0];
  NodeInputs node(r.graph, r.node);
  STRIDER_ASSIGN_OR_RETURN(c.group, r.node.attributes.get_int("group", 1));
  std::span<const int64_t> spatial(c.x.sizes.begin() + 2, c.x.sizes.end());
  std::span<const int64_t> kernel(c.w.sizes.begin() + 2, c.w.sizes.end());
  STRIDER_ASSIGN_OR_RETURN(c.window, resolve_window(node, spatial, kernel, false));
  if (r.node.op_type == kFusedConvOp) {
    const size_t extra = r.inputs.size() > 3 ? r.inputs.size() - 3 : 0;
    STRIDER_ASSIGN_OR_RETURN(FusedProgram program, read_fused_program_of(r.node, 1 + int(extra)));
    c.operands.assign(r.inputs.begin() + long(r.inputs.size() - extra), r.inputs.end());
    c.post_ops = plan_post_ops(r, program, c.y, 2, false);
    c.activation = std::move(program);
  }
  return c;
}

namespace {

// Weights [O, I/g, k...] seen as oneDNN's grouped [g, O/g, I/g, k...] when group > 1.
dnnl::memory::desc weights_desc(const TensorView& w, int64_t group) {
  if (group == 1) return onednn_desc(w);
  Shape sizes = {group, w.sizes[0] / group};
  Strides strides = {w.strides[0] * (w.sizes[0] / group), w.strides[0]};
  sizes.insert(sizes.end(), w.sizes.begin() + 1, w.sizes.end());
  strides.insert(strides.end(), w.strides.begin() + 1, w.strides.end());
  return onednn_desc(w.dtype, sizes, strides);
}

}  // namespace

int64_t multiply_adds(const ConvSetup& c) {
  return c.y.num_elements() * (c.w.num_elements() / std::max<int64_t>(c.w.sizes[0], 1));
}

Status OneDnnConv::init(const ConvSetup& c, const Tensor* constant_weights, bool with_post_ops,
                        const std::string& node, std::optional<int> team_size, dnnl::memory* shared_weights) {
  return onednn_call(node, [&] {
    using dnnl::memory;
    ScopedOmpThreads team(team_size.value_or(onednn_team_for(multiply_adds(c))));
    const WindowGeometry& g = c.window;
    memory::dims strides(g.strides.begin(), g.strides.end());
    memory::dims dilations, pad_l(g.pads_begin.begin(), g.pads_begin.end()),
        pad_r(g.pads_end.begin(), g.pads_end.end());
    for (int64_t d : g.dilations) dilations.push_back(d - 1);  // oneDNN counts the gaps
    auto x_md = onednn_desc(c.x), y_md = onednn_desc(c.y);
    auto w_plain = weights_desc(c.w, c.group);
    // Constant weights may take whatever layout is fastest; runtime ones stay as they are.
    auto w_md = constant_weights ? memory::desc(w_plain.dims(), w_plain.data_type(), memory::format_tag::any)
                                 : w_plain;
    std::unique_ptr<dnnl::convolution_forward::desc> desc;
    memory::desc b_md;
    auto prop = dnnl::prop_kind::forward_inference;
    auto algo = dnnl::algorithm::convolution_direct;
    if (c.bias.allocation) {
      b_md = onednn_desc(c.bias);
      desc = std::make_unique<dnnl::convolution_forward::desc>(prop, algo, x_md, w_md, b_md, y_md,
                                                                strides, dilations, pad_l, pad_r);
    } else {
      desc = std::make_unique<dnnl::convolution_forward::desc>(prop, algo, x_md, w_md, y_md, strides,
                                                                dilations, pad_l, pad_r);
    }
    dnnl::primitive_attr attr = onednn_attr();
    std::vector<std::pair<int, const TensorView*>> binary_args;
    if (with_post_ops) {
      dnnl::post_ops ops;
      std::string names;
      append_post_ops(c.post_ops->ops, ops, binary_args, names);
      attr.set_post_ops(ops);
    }
    dnnl::convolution_forward::primitive_desc pd(*desc, attr, onednn_engine());
    if (with_post_ops && has_binary(c.post_ops->ops) && !onednn_fast_binary_post_ops(onednn_impl_name(pd)))
      throw dnnl::error(dnnl_unimplemented, "binary post-ops outside the generated code");
    impl_ = onednn_impl_name(pd);
    if (with_post_ops) impl_ += '+' + describe_fused_program(*c.activation);  // not "+" + string: GCC 12's false -Wrestrict
    applies_activation_ = with_post_ops;
    primitive_ = dnnl::convolution_forward(pd);
    team_ = onednn_creates_team();
    const dnnl::memory w_mem = weights_for(pd, onednn_memory(c.w, w_plain), shared_weights);
    args_ = {{DNNL_ARG_SRC, onednn_memory(c.x, x_md)},
             {DNNL_ARG_WEIGHTS, w_mem},
             {DNNL_ARG_DST, onednn_memory(c.y, y_md)},
             {DNNL_ARG_SCRATCHPAD, dnnl::memory(pd.scratchpad_desc(), onednn_engine())}};
    if (c.bias.allocation) args_[DNNL_ARG_BIAS] = onednn_memory(c.bias, b_md);
    for (const auto& [index, operand] : binary_args)
      args_[DNNL_ARG_ATTR_MULTIPLE_POST_OP(index) | DNNL_ARG_SRC_1] = onednn_memory(*operand, onednn_desc(*operand));
  });
}

namespace {

// Direct convolution with any strides; accumulates in f32 (f64 for f64).
template <typename T>
class NaiveConv final : public Kernel {
  using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

 public:
  explicit NaiveConv(ConvSetup c) : c_(std::move(c)) {}
  Status run(const QueueContext& context) override {
    const int64_t spatial = c_.x.rank() - 2;
    const int64_t out_channels = c_.y.sizes[1], in_per_group = c_.w.sizes[1];
    const int64_t out_per_group = out_channels / c_.group;
    Shape out_spatial(c_.y.sizes.begin() + 2, c_.y.sizes.end());
    Shape kernel(c_.w.sizes.begin() + 2, c_.w.sizes.end());
    for (int64_t n = 0; n < c_.y.sizes[0]; ++n)
      for (int64_t oc = 0; oc < out_channels; ++oc) {
        int64_t first_ic = (oc / out_per_group) * in_per_group;
        Acc bias = c_.bias.allocation ? Acc(load(c_.bias.host_data_as<T>()[oc * c_.bias.strides[0]])) : Acc(0);
        Shape o(size_t(spatial), 0);
        for (int64_t p = 0; p < num_elements(out_spatial); ++p) {
          Acc sum = bias;
          for (int64_t ic = 0; ic < in_per_group; ++ic) sum += window_sum(n, oc, first_ic + ic, ic, o, kernel);
          int64_t y_off = n * c_.y.strides[0] + oc * c_.y.strides[1];
          for (int64_t d = 0; d < spatial; ++d) y_off += o[size_t(d)] * c_.y.strides[size_t(d) + 2];
          c_.y.host_data_as<T>()[y_off] = store<T>(ComputeType<T>(sum));
          advance_index(o, out_spatial);
        }
      }
    return Status::ok();
  }
  std::string implementation() const override { return "strider:naive-conv"; }

 private:
  Acc window_sum(int64_t n, int64_t oc, int64_t x_channel, int64_t w_channel, const Shape& o,
                 const Shape& kernel) const {
    const WindowGeometry& g = c_.window;
    Acc sum = 0;
    Shape k(kernel.size(), 0);
    for (int64_t t = 0; t < num_elements(kernel); ++t, advance_index(k, kernel)) {
      int64_t x_off = n * c_.x.strides[0] + x_channel * c_.x.strides[1];
      int64_t w_off = oc * c_.w.strides[0] + w_channel * c_.w.strides[1];
      bool inside = true;
      for (size_t d = 0; d < k.size(); ++d) {
        int64_t pos = o[d] * g.strides[d] + k[d] * g.dilations[d] - g.pads_begin[d];
        if (pos < 0 || pos >= c_.x.sizes[d + 2]) inside = false;
        x_off += pos * c_.x.strides[d + 2];
        w_off += k[d] * c_.w.strides[d + 2];
      }
      if (inside)
        sum += Acc(load(c_.x.host_data_as<T>()[x_off])) * Acc(load(c_.w.host_data_as<T>()[w_off]));
    }
    return sum;
  }
  ConvSetup c_;
};

bool positive_strides(const TensorView& v) {
  for (size_t d = 0; d < v.sizes.size(); ++d)
    if (v.sizes[d] > 1 && v.strides[d] <= 0) return false;
  return true;
}

// A pointwise convolution over views oneDNN's convolution would read slowly (a channel
// slice of a concat) runs as a oneDNN matmul over the same views (docs/MEMORY_MODEL.md rule 3).
// The activation rides along as oneDNN's post-ops where they are all eltwise (`applied`
// says so): a binary operand has the conv's shape, not the matmul's.
std::optional<KernelPtr> pointwise_kernel(const ConvSetup& c, const std::string& node, bool constant_weights,
                                          bool* applied) {
  bool eltwise = c.post_ops && !c.post_ops->ops.empty();
  for (const OneDnnPostOp& op : eltwise ? c.post_ops->ops : std::vector<OneDnnPostOp>{}) eltwise = eltwise && !op.is_binary;
  for (const PointwiseMatMul& m :
       pointwise_conv_as_matmul(c.x, c.w, c.bias.allocation ? &c.bias : nullptr, c.y, c.group, c.window)) {
    const TensorView* bias = m.bias.allocation ? &m.bias : nullptr;
    // Channels-last, the weights are B; channels-first (per batch), they are A.
    const bool constant_b = constant_weights && m.views.b.allocation == c.w.allocation &&
                            m.views.b.byte_offset == c.w.byte_offset;
    if (eltwise) {
      auto kernel = make_matmul_of(m.views, bias, 1.0f, node, c.post_ops->ops, constant_b);
      *applied = kernel.is_ok();
      if (kernel.is_ok()) return std::move(kernel).value();
    }
    auto kernel = make_matmul_of(m.views, bias, 1.0f, node, {}, constant_b);
    *applied = false;
    if (kernel.is_ok()) return std::move(kernel).value();
  }
  return std::nullopt;
}

// `conv` with the setup's activation applied, unless the kernel already applies it.
Result<KernelPtr> with_activation(KernelPtr conv, const ConvSetup& c, bool applied) {
  if (!c.activation || applied) return conv;
  std::vector<TensorView> operands{c.y};
  operands.insert(operands.end(), c.operands.begin(), c.operands.end());
  STRIDER_ASSIGN_OR_RETURN(KernelPtr activation, make_fused_program_kernel(*c.activation, c.y, operands));
  return make_kernel_then(std::move(conv), std::move(activation));
}

// The activation the Winograd kernel applies itself, when the post-op plan is one it has.
std::optional<WinogradActivation> winograd_activation_of(const ConvSetup& c) {
  if (!c.activation) return WinogradActivation::kNone;
  if (!c.post_ops || c.post_ops->bias || c.post_ops->ops.size() != 1 || c.post_ops->ops[0].is_binary) return std::nullopt;
  const OneDnnEltwise& e = c.post_ops->ops[0].eltwise;
  if (e.algorithm == dnnl::algorithm::eltwise_swish && e.alpha == 1.0f) return WinogradActivation::kSilu;
  if (e.algorithm == dnnl::algorithm::eltwise_relu && e.alpha == 0.0f) return WinogradActivation::kRelu;
  if (e.algorithm == dnnl::algorithm::eltwise_logistic) return WinogradActivation::kSigmoid;
  return std::nullopt;
}

// A 3x3 stride-1 f32 convolution with constant weights over channels-inner views runs as
// Winograd F(4x4, 3x3) where that pays (hal/cpu/winograd_conv.h says why and when).
std::optional<KernelPtr> winograd_kernel(const ConvSetup& c, const KernelRequest& r) {
  const WindowGeometry& g = c.window;
  if (!thread_allows_winograd || !r.constant_input(1) || c.x.dtype != DType::kF32 || c.x.rank() != 4 || c.group != 1 || c.w.sizes[2] != 3 ||
      c.w.sizes[3] != 3 || c.x.strides[1] != 1 || c.y.strides[1] != 1)
    return std::nullopt;
  for (size_t d = 0; d < 2; ++d)
    if (g.strides[d] != 1 || g.dilations[d] != 1) return std::nullopt;
  if (!winograd_conv_pays(c.x.sizes[1], c.y.sizes[1], c.y.sizes[2], c.y.sizes[3])) return std::nullopt;
  WinogradConvArgs args{.x = c.x, .y = c.y, .weights = c.w.host_data_as<float>(), .weight_strides = c.w.strides};
  if (c.bias.allocation) args.bias = c.bias;
  args.pad_top = g.pads_begin[0];
  args.pad_left = g.pads_begin[1];
  std::optional<WinogradActivation> activation = winograd_activation_of(c);
  args.activation = activation.value_or(WinogradActivation::kNone);
  auto kernel = make_winograd_conv(args, r.node.name);
  if (!kernel.is_ok()) return std::nullopt;
  auto with = with_activation(std::move(kernel).value(), c, activation.has_value());
  if (!with.is_ok()) return std::nullopt;
  return std::move(with).value();
}

bool all_packed(const ConvSetup& c) {
  return is_packed(c.x) && is_packed(c.w) && is_packed(c.y) && (!c.bias.allocation || is_packed(c.bias));
}

// A convolution cut into bands, one oneDNN primitive a band, each created for one thread,
// the bands run side by side on the session's team: bands of images when the batch has at
// least one a thread, else bands of output rows (the first spatial axis: rows of a 2-D
// convolution, steps of a 1-D one). Why: on two threads oneDNN's own split left
// MobileNetV2's largest layers (its first convolution, the 112x112 depthwise one, the
// 56x56 projections) at 0.96-1.25x of their one-thread time, and with strider's own team
// (hal/cpu/own_team.h) no oneDNN primitive starts threads of its own. Bands of the same
// rows land on the same thread from layer to layer, so a thread mostly reads what it
// wrote. Every band is a view of the node's own views (no copy): its output rows, the input
// rows they need with the pads cut to match, the same rows of a residual operand; the
// weights are reordered once and shared.
class BandedConv final : public Kernel {
 public:
  enum class Axis { kBatch, kRows, kChannels };
  Status init(const ConvSetup& c, const Tensor* constant_weights, bool with_post_ops, const std::string& node, int bands,
              Axis axis);
  bool applies_activation() const { return applies_activation_; }
  Status run(const QueueContext& context) override { return run_side_by_side(bands_, work_per_band_, context); }
  std::string implementation() const override {
    const char* what = axis_ == Axis::kBatch ? "images" : axis_ == Axis::kRows ? "rows" : "output channels";
    return fmt::format("{} bands of {}: {}", bands_.size(), what, bands_.front()->implementation());
  }

 private:
  std::vector<std::unique_ptr<Kernel>> bands_;  // OneDnnConv, or one staged through dense memory
  bool applies_activation_ = false;
  dnnl::memory shared_weights_;
  int64_t work_per_band_ = 0;
  Axis axis_ = Axis::kRows;
};

// The setup of output rows [h0, h1): the input rows they read, the pads cut to those rows.
Result<ConvSetup> rows_band_of(const ConvSetup& c, int64_t h0, int64_t h1) {
  ConvSetup b = c;
  WindowGeometry& g = b.window;
  const int64_t height = c.y.sizes[2], span = (c.w.sizes[2] - 1) * g.dilations[0] + 1;
  const int64_t first = h0 * g.strides[0] - c.window.pads_begin[0], last = (h1 - 1) * g.strides[0] - c.window.pads_begin[0] + span;
  const int64_t in0 = std::max<int64_t>(first, 0), in1 = std::min<int64_t>(last, c.x.sizes[2]);
  if (in1 <= in0) return unsupported("a band of padding only");
  g.pads_begin[0] = in0 - first;
  g.pads_end[0] = last - in1;
  STRIDER_ASSIGN_OR_RETURN(b.x, slice_view(c.x, 2, in0, in1, 1));
  STRIDER_ASSIGN_OR_RETURN(b.y, part_of(c.y, 2, h0, h1, height));
  if (b.post_ops) STRIDER_RETURN_IF_ERROR(cut_binary_operands(b.post_ops->ops, 2, h0, h1, height));
  return b;
}

// The setup of output channels [i0, i1) of a convolution of one group, or of groups
// [i0, i1) of a grouped one (a depthwise one: its channels): their input channels, weights,
// bias and per-channel or full residual operands.
Result<ConvSetup> channels_band_of(const ConvSetup& c, int64_t i0, int64_t i1) {
  ConvSetup b = c;
  // [i0, i1) counts output channels of one group, or groups of several.
  const int64_t out_per = c.group > 1 ? c.y.sizes[1] / c.group : 1, in_per = c.x.sizes[1] / c.group;
  const int64_t channels = c.y.sizes[1];
  const int64_t c0 = i0 * out_per, c1 = i1 * out_per;
  if (c.group > 1) {
    STRIDER_ASSIGN_OR_RETURN(b.x, part_of(c.x, 1, i0 * in_per, i1 * in_per, c.x.sizes[1]));
    b.group = i1 - i0;
  }
  STRIDER_ASSIGN_OR_RETURN(b.y, part_of(c.y, 1, c0, c1, channels));
  STRIDER_ASSIGN_OR_RETURN(b.w, part_of(c.w, 0, c0, c1, channels));
  if (c.bias.allocation) {
    STRIDER_ASSIGN_OR_RETURN(b.bias, part_of(c.bias, 0, c0, c1, channels));
  }
  if (b.post_ops) STRIDER_RETURN_IF_ERROR(cut_binary_operands(b.post_ops->ops, 1, c0, c1, channels));
  return b;
}

// The setup of images [n0, n1).
Result<ConvSetup> batch_band_of(const ConvSetup& c, int64_t n0, int64_t n1) {
  ConvSetup b = c;
  const int64_t batch = c.y.sizes[0];
  STRIDER_ASSIGN_OR_RETURN(b.x, part_of(c.x, 0, n0, n1, batch));
  STRIDER_ASSIGN_OR_RETURN(b.y, part_of(c.y, 0, n0, n1, batch));
  if (b.post_ops) STRIDER_RETURN_IF_ERROR(cut_binary_operands(b.post_ops->ops, 0, n0, n1, batch));
  return b;
}

Status BandedConv::init(const ConvSetup& c, const Tensor* constant_weights, bool with_post_ops, const std::string& node,
                        int bands, Axis axis) {
  axis_ = axis;
  // Bands of channels of a grouped convolution are bands of its groups.
  const int64_t extent = axis == Axis::kBatch ? c.y.sizes[0] : axis == Axis::kRows ? c.y.sizes[2]
                         : c.group > 1        ? c.group
                                              : c.y.sizes[1];
  work_per_band_ = multiply_adds(c) / bands;
  for (int k = 0; k < bands; ++k) {
    const int64_t i0 = extent * k / bands, i1 = extent * (k + 1) / bands;
    STRIDER_ASSIGN_OR_RETURN(ConvSetup band, axis == Axis::kBatch  ? batch_band_of(c, i0, i1)
                                             : axis == Axis::kRows ? rows_band_of(c, i0, i1)
                                                                   : channels_band_of(c, i0, i1));
    // A band of channels of a channels-last output is a strided channel slice, which
    // oneDNN's fast convolutions do not write: it runs into dense memory of its own and its
    // thread copies that into the slice (staged_output.h).
    std::optional<StagedOutput> staged;
    const TensorView band_out = band.y;
    if (axis == Axis::kChannels && c.y.strides[1] == 1 && !is_packed(band.y)) {
      STRIDER_ASSIGN_OR_RETURN(staged, stage_output(band.y));
      band.y = staged->dense;
    }
    auto conv = std::make_unique<OneDnnConv>();
    // Bands of output channels have weights of their own; the others share one reorder.
    STRIDER_RETURN_IF_ERROR(conv->init(band, constant_weights, with_post_ops, node, 1,
                                       axis == Axis::kChannels ? nullptr : &shared_weights_));
    if (!bands_.empty() && conv->applies_activation() != applies_activation_)
      return unsupported("bands that differ in their post-ops");
    applies_activation_ = conv->applies_activation();
    if (staged) {
      bands_.push_back(make_staged_kernel(std::move(conv), std::move(*staged), band_out));
    } else {
      bands_.push_back(std::move(conv));
    }
  }
  return Status::ok();
}

// How a convolution may be cut into bands for a team of `threads`, best first.
// With strider's own team (hal/cpu/own_team.h), every convolution of serial_multiply_adds()
// or more is: by images when there is one a thread; else, channels-last, by output rows,
// two a band (one image of a 1-D, 2-D or 3-D convolution); else by output
// channels (8 a thread, or 8 groups a thread of a grouped one: a channels-first band of rows
// is a strided piece of every channel, which oneDNN runs on its reference code, while a
// band of channels is dense);
// else by rows anyway. Under OpenMP's team (oneDNN splits its primitives itself) only
// one-image, 2-D, channels-last pointwise and depthwise convolutions of 128 times a
// thread's minimum work (hal/cpu/parallel.h) a band: there alternated end-to-end runs on
// two threads put MobileNetV2 (its 1x1 and depthwise layers in bands) 2% ahead, but
// YOLOv8n, whose banded layers were 3x3 convolutions of one group (stride 2 mostly), 4%
// behind. The kernel suite's cpu-split device lowers the minimum work, so its small
// convolutions run in bands too. STRIDER_CPU_CONV_BANDS=off (for measuring) never.
std::vector<std::pair<BandedConv::Axis, int>> bands_axes(const ConvSetup& c, int threads) {
  using Axis = BandedConv::Axis;
  static const bool off = [] {
    const char* env = std::getenv("STRIDER_CPU_CONV_BANDS");
    return env && std::string_view(env) == "off";
  }();
  if (off || threads < 2 || c.x.rank() < 3) return {};
  const bool channels_inner = c.x.strides[1] == 1 && c.y.strides[1] == 1;
  if (own_team_enabled()) {
    if (multiply_adds(c) < serial_multiply_adds()) return {};
    if (c.y.sizes[0] >= threads) return {{Axis::kBatch, threads}};
    // As many bands as threads where the axis allows, fewer where it does not (a 7x7 map
    // on 16 threads: 3 bands of rows beat one thread); the axis giving the most first.
    auto bands = [&](int64_t units) { return int(std::min<int64_t>(threads, units)); };
    const int rows = bands(c.y.sizes[2] / 2), channels = bands(c.group == 1 ? c.y.sizes[1] / 8 : c.group / 8);
    std::vector<std::pair<Axis, int>> axes;
    if (channels_inner) axes.push_back({Axis::kRows, rows});
    axes.push_back({Axis::kChannels, channels});
    if (!channels_inner) axes.push_back({Axis::kRows, rows});
    axes.push_back({Axis::kBatch, bands(c.y.sizes[0])});
    std::erase_if(axes, [](const auto& a) { return a.second < 2; });
    std::stable_sort(axes.begin(), axes.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    // Bands of rows each read all the weights; bands of output channels each read all the
    // input and write through a staged copy. Channels-last, channels come first where the
    // weights outweigh the activations 4 to 1 and each band keeps whole 16-channel blocks:
    // on two threads MobileNetV2's 7x7 layers (320 -> 1280: 0.163 -> 0.148 ms, 960 -> 320:
    // 0.118 -> 0.105) gained; at 2-3 to 1 (its 160 -> 960, YOLOv8n's 10x10 layers) neither
    // won, and 80-channel outputs (bands of 40) lost 10%.
    const int64_t weight_bytes = num_elements(c.w.sizes) * dtype_size(c.w.dtype);
    const int64_t activation_bytes = (num_elements(c.x.sizes) + num_elements(c.y.sizes)) * dtype_size(c.x.dtype);
    if (channels_inner && c.group == 1 && weight_bytes > 4 * activation_bytes && c.y.sizes[1] % (16 * channels) == 0)
      std::stable_sort(axes.begin(), axes.end(),
                       [](const auto& a, const auto& b) { return a.first == Axis::kChannels && b.first != Axis::kChannels; });
    return axes;
  }
  if (c.x.rank() != 4) return {};  // the weights' dims 2 and 3 are read below
  const bool pointwise = c.w.sizes[2] == 1 && c.w.sizes[3] == 1;
  const bool depthwise = c.group > 1 && c.group == c.x.sizes[1] && c.w.sizes[1] == 1;
  if (channels_inner && (pointwise || depthwise) && c.y.sizes[0] == 1 && c.y.sizes[2] >= 2 * threads &&
      multiply_adds(c) >= 128 * thread_min_work_per_thread * threads)
    return {{Axis::kRows, threads}};
  return {};
}

// The oneDNN convolution over the setup, as bands where they pay.
Result<KernelPtr> onednn_conv(const ConvSetup& c, const Tensor* constant_weights, bool with_post_ops,
                              const std::string& node, bool* applies) {
  const int threads = max_parallel_threads();
  for (const auto& [axis, bands] : bands_axes(c, threads)) {
    auto banded = std::make_unique<BandedConv>();
    if (banded->init(c, constant_weights, with_post_ops, node, bands, axis).is_ok() &&
        banded->implementation().find(":ref") == std::string::npos) {
      *applies = banded->applies_activation();
      return KernelPtr(std::move(banded));
    }
  }
  auto kernel = std::make_unique<OneDnnConv>();
  STRIDER_RETURN_IF_ERROR(kernel->init(c, constant_weights, with_post_ops, node));
  *applies = kernel->applies_activation();
  return KernelPtr(std::move(kernel));
}

// f32 and bf16 run on oneDNN: its convolution, or its matmul for a pointwise convolution
// over strided views. When oneDNN offers only its reference implementation (or nothing)
// for strided, non-packed views, the kernel refuses them (docs/MEMORY_MODEL.md rule 3: that path is
// hundreds of times slower) so the planner gives this node packed operands instead.
// Packed operands always get a kernel: oneDNN's, or the naive one for other dtypes.
}  // namespace

// The fastest convolution of these views for `r`'s node (its weights and bias), with the
// setup's activation.
Result<KernelPtr> make_conv_of(const ConvSetup& c, const KernelRequest& r) {
  DType dtype = c.y.dtype;
  bool fast_dtype = dtype == DType::kF32 || dtype == DType::kBF16;
  if (fast_dtype && (!is_packed(c.x) || !is_packed(c.y))) {
    bool applied = false;
    if (std::optional<KernelPtr> kernel = pointwise_kernel(c, r.node.name, r.constant_input(1) != nullptr, &applied))
      return with_activation(std::move(*kernel), c, applied);
  }
  if (std::optional<KernelPtr> kernel = winograd_kernel(c, r)) return std::move(*kernel);
  if (fast_dtype && c.x.rank() <= 5 && positive_strides(c.x) && positive_strides(c.w) && positive_strides(c.y)) {
    bool conv_applies = false;
    Result<KernelPtr> kernel = c.post_ops ? onednn_conv(c, r.constant_input(1), true, r.node.name, &conv_applies)
                                          : Result<KernelPtr>(unsupported("no post-ops"));
    // Post-ops that only oneDNN's reference convolution takes are not worth it.
    if (kernel.is_ok() && (*kernel)->implementation().find(":ref") != std::string::npos) kernel = unsupported("reference only");
    if (!kernel.is_ok() && kernel.status().code() == StatusCode::kUnsupported)  // without them, then the program
      kernel = onednn_conv(c, r.constant_input(1), false, r.node.name, &conv_applies);
    if (!kernel.is_ok() && kernel.status().code() != StatusCode::kUnsupported) return kernel.status();
    const bool reference_only = !kernel.is_ok() || (*kernel)->implementation().find(":ref") != std::string::npos;
    if (kernel.is_ok() && !reference_only) return with_activation(std::move(kernel).value(), c, conv_applies);
    // oneDNN's reference convolution is far slower than its matmul for a pointwise one
    // (YOLOv8's DFL: 16 -> 1 channels over channels-last views took 2 ms of a 25 ms run).
    bool applied = false;
    if (std::optional<KernelPtr> matmul = pointwise_kernel(c, r.node.name, r.constant_input(1) != nullptr, &applied))
      return with_activation(std::move(*matmul), c, applied);
    if (kernel.is_ok() && all_packed(c)) return with_activation(std::move(kernel).value(), c, conv_applies);
  }
  if (fast_dtype && !all_packed(c))
    return unsupported(fmt::format("node '{}': no fast convolution reads or writes these strided views; "
                                   "x {}, y {}", r.node.name, c.x.to_string(), c.y.to_string()));
  return dispatch_dtype(dtype, [&]<typename T>() -> Result<KernelPtr> {
    if constexpr (is_float_storage_v<T>) return with_activation(KernelPtr(new NaiveConv<T>(c)), c, false);
    else return unsupported(fmt::format("Conv on {}", dtype_name(dtype)));
  });
}

Result<KernelPtr> make_conv(const KernelRequest& r) {
  STRIDER_ASSIGN_OR_RETURN(ConvSetup c, resolve_conv(r));
  return make_conv_of(c, r);
}

// A kernel that owns the scratch its inner kernels pass a value through.
class WithScratch final : public Kernel {
 public:
  WithScratch(KernelScratch scratch, KernelPtr inner) : scratch_(std::move(scratch)), inner_(std::move(inner)) {}
  Status run(const QueueContext& context) override { return inner_->run(context); }
  std::string implementation() const override { return inner_->implementation(); }

 private:
  KernelScratch scratch_;
  KernelPtr inner_;
};

// FusedGatedConv (ops/fused_elementwise.h): the convolution's 2K channels into scratch the
// kernel owns (in y's memory order), then the gate as one program over the two halves. The
// CPU forms the node for no model (CpuDevice::fuses_gated_conv: never measured to pay);
// the kernel keeps the node's meaning checked on cpu and sim by the kernel suite.
Result<KernelPtr> make_gated_conv(const KernelRequest& r) {
  STRIDER_ASSIGN_OR_RETURN(ConvSetup c, resolve_conv(r));  // c.y: the gate's output, K channels
  const size_t extra = r.inputs.size() > 3 ? r.inputs.size() - 3 : 0;
  STRIDER_ASSIGN_OR_RETURN(FusedProgram program, read_fused_program_of(r.node, 2 + int(extra)));
  Shape sizes = c.y.sizes;
  sizes[1] *= 2;
  KernelScratch scratch = make_kernel_scratch(num_elements(sizes) * dtype_size(c.y.dtype), "gated convolution's channels");
  ConvSetup full = c;
  STRIDER_ASSIGN_OR_RETURN(full.y, make_view(*scratch.allocation, 0, c.y.dtype, sizes,
                                             dense_strides_in_order_of(sizes, c.y.strides), "gated channels"));
  STRIDER_ASSIGN_OR_RETURN(KernelPtr conv, make_conv_of(full, r));
  std::vector<TensorView> registers(2);
  STRIDER_ASSIGN_OR_RETURN(registers[0], slice_view(full.y, 1, 0, c.y.sizes[1], 1));
  STRIDER_ASSIGN_OR_RETURN(registers[1], slice_view(full.y, 1, c.y.sizes[1], sizes[1], 1));
  registers.insert(registers.end(), r.inputs.end() - long(extra), r.inputs.end());
  STRIDER_ASSIGN_OR_RETURN(KernelPtr gate, make_fused_program_kernel(program, c.y, registers));
  return KernelPtr(new WithScratch(std::move(scratch), make_kernel_then(std::move(conv), std::move(gate))));
}

void register_conv_kernels(std::vector<KernelEntry>& table) {
  table.push_back({"Conv", make_conv, true});
  table.push_back({kFusedConvOp, make_conv, true});
  table.push_back({kFusedGatedConvOp, make_gated_conv, true});
}

}  // namespace strider::cpu
