// FusedPointwiseDepthwise on the CPU (ops/conv_chain.h): a MobileNet block's expansion
// (1x1 convolution and its activation) and depthwise convolution, run band by band so the
// expanded rows are computed into scratch that stays in the core's L2 cache and read back
// from there, instead of being written whole (4.8 MB for MobileNetV2's first expansion at
// 112x112) and read back from memory.
//
// Why: run as two steps, the expansion writes its output into arena memory that the rest
// of the run has long evicted, so every line it writes is first read from memory, and the
// depthwise step then reads it all back. Measured at one thread on MobileNetV2's first
// block (AMD EPYC): the two steps took 0.37 + 0.16 ms inside the run and 0.20 + 0.09 ms
// alone in a two-node model whose memory stays cached.
//
// How: a chain takes output rows [first, last) of every image, in bands of a few rows.
// Each band needs the expanded rows under its window; those the previous band computed
// already (the window overlaps by kernel - stride rows) are moved to the top of the
// scratch, the new ones are computed below them by a oneDNN pointwise convolution over the
// input rows, and a oneDNN depthwise convolution over the scratch rows writes the band's
// output rows. The primitives are made once per distinct band shape and run on each band's
// addresses (OneDnnConv::run_at). With several threads, each thread runs a chain over its
// share of the rows with a scratch of its own; only the rows at a share's edge are
// computed twice.
//
// Where oneDNN offers no fast primitive for a band (its reference code only) or an
// activation does not become a post-op, the kernel runs the two convolutions whole through
// the Conv kernel factory, with the intermediate in scratch memory of its full size: the
// same result, the speed of the unfused steps.
#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>

#include "hal/cpu/cpu_kernels.h"
#include "hal/cpu/onednn_conv.h"
#include "hal/cpu/parallel.h"
#include "hal/cpu/staged_output.h"
#include "ops/conv_chain.h"

namespace strider::cpu {
namespace {

// Scratch a chain's band of expanded rows may take: half a current core's L2 (1 MB on the
// Zen 5 this was measured on), so that the band's input and output rows stay cached beside
// it. On MobileNetV2's first block (112x112x96 expanded, one thread, all cached) bands of
// 128 KB (one output row of stride 2) ran 1.7x slower than the two steps, 256 KB up to 1.4x,
// 512 KB and up as fast (a band's primitive calls cost a few microseconds each). Lowered
// with the thread's minimum work (hal/cpu/parallel.h) so the kernel suite's cpu-split
// device runs bands of one row. STRIDER_CPU_CHAIN_BAND_BYTES (for measuring) sets it.
int64_t band_scratch_bytes() {
  static const int64_t bytes = [] {
    const char* env = std::getenv("STRIDER_CPU_CHAIN_BAND_BYTES");
    return env ? std::max<int64_t>(std::atoll(env), 1) : int64_t(512) << 10;
  }();
  return bytes * std::min(thread_min_work_per_thread, kMinWorkPerThread) / kMinWorkPerThread;
}

// One band: output rows [o0, o1) from expanded rows [in0, in1) (the window's rows inside
// the image). Before it, `carry` rows at scratch row `carry_from` (the previous band's
// rows from in0 on) move to row 0; expanded rows [new0, in1) are computed below them.
struct Band {
  int64_t o0 = 0, o1 = 0, in0 = 0, in1 = 0, carry_from = 0, carry = 0, new0 = 0;
  OneDnnConv* pointwise = nullptr;  // null when the band needs no new rows
  OneDnnConv* depthwise = nullptr;
};

// One thread's rows of every image, its scratch and its primitives (run_at changes their
// memory handles, so a chain's are its own).
struct Chain {
  KernelScratch scratch;
  std::vector<Band> bands;
  std::map<int64_t, std::unique_ptr<OneDnnConv>> pointwise;  // by rows
  std::map<std::tuple<int64_t, int64_t, int64_t>, std::unique_ptr<OneDnnConv>> depthwise;  // rows in, pads
};

struct ChainSetup {
  ConvSetup pointwise, depthwise;  // over the whole X and Y; the intermediate's views unset
  const Tensor* pointwise_weights = nullptr;
  const Tensor* depthwise_weights = nullptr;
  std::string node;
};

class BandedChain final : public Kernel {
 public:
  Status init(const ChainSetup& s, int chains);
  Status run(const QueueContext&) override;
  std::string implementation() const override { return impl_; }

 private:
  Result<Band> plan_band(Chain& chain, int64_t o0, int64_t o1, const Band* previous);
  Result<OneDnnConv*> pointwise_for(Chain& chain, int64_t rows);
  Result<OneDnnConv*> depthwise_for(Chain& chain, int64_t rows, int64_t pad_top, int64_t pad_bottom, int64_t out_rows);
  void run_chain(Chain& chain) const;

  ChainSetup s_;
  std::vector<Chain> chains_;
  dnnl::memory pointwise_weights_, depthwise_weights_;  // reordered once, shared by every band
  int64_t row_bytes_ = 0, scratch_rows_ = 0, band_rows_ = 0;
  std::string impl_;
};

// Scratch rows as a [1, C, rows, W] channels-last view at scratch row 0.
Result<TensorView> scratch_view(const Chain& chain, const ConvSetup& pointwise, int64_t rows, int64_t capacity) {
  const int64_t channels = pointwise.y.sizes[1], width = pointwise.x.sizes[3];
  return make_view(*chain.scratch.allocation, 0, pointwise.y.dtype, {1, channels, rows, width},
                   {capacity * width * channels, 1, width * channels, channels}, "chain-band");
}

// The first image's rows [r0, r1) of `view` (an image's band keeps the image's strides).
Result<TensorView> image_rows(const TensorView& view, int64_t r0, int64_t r1) {
  STRIDER_ASSIGN_OR_RETURN(TensorView image, slice_view(view, 0, 0, 1, 1));
  return slice_view(image, 2, r0, r1, 1);
}

Result<OneDnnConv*> BandedChain::pointwise_for(Chain& chain, int64_t rows) {
  std::unique_ptr<OneDnnConv>& kernel = chain.pointwise[rows];
  if (kernel) return kernel.get();
  ConvSetup c = s_.pointwise;
  STRIDER_ASSIGN_OR_RETURN(c.x, image_rows(s_.pointwise.x, 0, rows));
  STRIDER_ASSIGN_OR_RETURN(c.y, scratch_view(chain, s_.pointwise, rows, scratch_rows_));
  kernel = std::make_unique<OneDnnConv>();
  STRIDER_RETURN_IF_ERROR(kernel->init(c, s_.pointwise_weights, c.post_ops.has_value(), s_.node, 1, &pointwise_weights_));
  return kernel.get();
}

Result<OneDnnConv*> BandedChain::depthwise_for(Chain& chain, int64_t rows, int64_t pad_top, int64_t pad_bottom,
                                               int64_t out_rows) {
  std::unique_ptr<OneDnnConv>& kernel = chain.depthwise[{rows, pad_top, pad_bottom}];
  if (kernel) return kernel.get();
  ConvSetup c = s_.depthwise;
  STRIDER_ASSIGN_OR_RETURN(c.x, scratch_view(chain, s_.pointwise, rows, scratch_rows_));
  STRIDER_ASSIGN_OR_RETURN(c.y, image_rows(s_.depthwise.y, 0, out_rows));
  c.window.pads_begin[0] = pad_top;
  c.window.pads_end[0] = pad_bottom;
  kernel = std::make_unique<OneDnnConv>();
  STRIDER_RETURN_IF_ERROR(kernel->init(c, s_.depthwise_weights, c.post_ops.has_value(), s_.node, 1, &depthwise_weights_));
  return kernel.get();
}

Result<Band> BandedChain::plan_band(Chain& chain, int64_t o0, int64_t o1, const Band* previous) {
  const WindowGeometry& g = s_.depthwise.window;
  const int64_t stride = g.strides[0], span = s_.depthwise.w.sizes[2], height = s_.pointwise.x.sizes[2];
  Band b;
  b.o0 = o0, b.o1 = o1;
  const int64_t first = o0 * stride - g.pads_begin[0], last = (o1 - 1) * stride - g.pads_begin[0] + span;
  b.in0 = std::max<int64_t>(first, 0), b.in1 = std::min(last, height);
  b.new0 = b.in0;
  if (previous && previous->in0 <= b.in0 && b.in0 < previous->in1) {
    b.carry_from = b.in0 - previous->in0, b.carry = previous->in1 - b.in0, b.new0 = previous->in1;
  }
  if (b.in1 > b.new0) {
    STRIDER_ASSIGN_OR_RETURN(b.pointwise, pointwise_for(chain, b.in1 - b.new0));
  }
  STRIDER_ASSIGN_OR_RETURN(b.depthwise, depthwise_for(chain, b.in1 - b.in0, b.in0 - first, last - b.in1, o1 - o0));
  return b;
}

Status BandedChain::init(const ChainSetup& s, int chains) {
  s_ = s;
  const ConvSetup& pw = s_.pointwise;
  if (s_.depthwise.window.dilations[0] != 1) return unsupported("a dilated depthwise convolution");
  const int64_t stride = s_.depthwise.window.strides[0], span = s_.depthwise.w.sizes[2];
  const int64_t out_rows = s_.depthwise.y.sizes[2];
  row_bytes_ = pw.x.sizes[3] * pw.y.sizes[1] * int64_t(dtype_size(pw.y.dtype));
  // As many output rows a band as keep its expanded rows within the scratch bytes.
  const int64_t fit = std::max<int64_t>(band_scratch_bytes() / row_bytes_, span);
  band_rows_ = std::clamp<int64_t>((fit - span) / stride + 1, 1, out_rows);
  scratch_rows_ = (band_rows_ - 1) * stride + span;
  chains = int(std::clamp<int64_t>(chains, 1, (out_rows + band_rows_ - 1) / band_rows_));
  chains_.resize(size_t(chains));
  for (int t = 0; t < chains; ++t) {
    Chain& chain = chains_[size_t(t)];
    chain.scratch = make_kernel_scratch(scratch_rows_ * row_bytes_, "chain-band");
    const int64_t first = out_rows * t / chains, last = out_rows * (t + 1) / chains;
    for (int64_t o0 = first; o0 < last; o0 += band_rows_) {
      STRIDER_ASSIGN_OR_RETURN(Band band, plan_band(chain, o0, std::min(o0 + band_rows_, last),
                                                     chain.bands.empty() ? nullptr : &chain.bands.back()));
      chain.bands.push_back(band);
    }
  }
  const Band& any = chains_.front().bands.front();
  impl_ = fmt::format("{} chains of bands of {} rows: {} then {}", chains, band_rows_,
                      any.pointwise->implementation(), any.depthwise->implementation());
  for (const Chain& chain : chains_) {
    for (const auto& [rows, kernel] : chain.pointwise)
      if (!kernel->applies_activation() && s_.pointwise.activation) return unsupported("activation not a post-op");
    for (const auto& [key, kernel] : chain.depthwise)
      if (!kernel->applies_activation() && s_.depthwise.activation) return unsupported("activation not a post-op");
  }
  if (impl_.find(":ref") != std::string::npos) return unsupported("oneDNN's reference code only");
  return Status::ok();
}

void BandedChain::run_chain(Chain& chain) const {
  std::byte* scratch = chain.scratch.bytes.get();
  const TensorView &x = s_.pointwise.x, &y = s_.depthwise.y;
  const int64_t x_size = int64_t(dtype_size(x.dtype)), y_size = int64_t(dtype_size(y.dtype));
  for (int64_t n = 0; n < x.sizes[0]; ++n) {
    std::byte* x_image = x.host_data() + n * x.strides[0] * x_size;
    std::byte* y_image = y.host_data() + n * y.strides[0] * y_size;
    for (const Band& b : chain.bands) {
      if (b.carry > 0) std::memmove(scratch, scratch + b.carry_from * row_bytes_, size_t(b.carry * row_bytes_));
      // Errors of a primitive made and checked at creation would be oneDNN's own faults.
      if (b.pointwise)
        (void)b.pointwise->run_at(x_image + b.new0 * x.strides[2] * x_size, scratch + (b.new0 - b.in0) * row_bytes_);
      (void)b.depthwise->run_at(scratch, y_image + b.o0 * y.strides[2] * y_size);
    }
  }
}

Status BandedChain::run(const QueueContext&) {
  const int64_t work = multiply_adds(s_.pointwise) + multiply_adds(s_.depthwise);
  parallel_for(int64_t(chains_.size()), work / int64_t(chains_.size()), [&](int64_t begin, int64_t end, int) {
    for (int64_t c = begin; c < end; ++c) run_chain(chains_[size_t(c)]);
  });
  return Status::ok();
}

// The two convolutions whole, the intermediate in scratch of its full size.
class WholeChain final : public Kernel {
 public:
  Status init(const KernelRequest& r, const ConvChainParts& parts);
  Status run(const QueueContext& context) override {
    STRIDER_RETURN_IF_ERROR(pointwise_->run(context));
    return depthwise_->run(context);
  }
  Status check_completed() override {
    STRIDER_RETURN_IF_ERROR(pointwise_->check_completed());
    return depthwise_->check_completed();
  }
  std::string implementation() const override {
    return "whole: " + pointwise_->implementation() + " then " + depthwise_->implementation();
  }

 private:
  KernelScratch intermediate_;
  std::unique_ptr<Kernel> pointwise_, depthwise_;
};

// The intermediate's sizes (the pointwise output over X's image) and its view on `scratch`,
// channels-last like X when X is.
Result<TensorView> intermediate_view(const KernelRequest& r, const KernelScratch& scratch) {
  const TensorView& x = r.inputs[0];
  const Shape sizes = {x.sizes[0], r.inputs[1].sizes[0], x.sizes[2], x.sizes[3]};
  return make_view(*scratch.allocation, 0, x.dtype, sizes, dense_strides_in_order_of(sizes, x.strides), "chain");
}

Status WholeChain::init(const KernelRequest& r, const ConvChainParts& parts) {
  const int64_t bytes = r.inputs[0].sizes[0] * r.inputs[1].sizes[0] * r.inputs[0].sizes[2] * r.inputs[0].sizes[3] *
                        int64_t(dtype_size(r.inputs[0].dtype));
  intermediate_ = make_kernel_scratch(bytes, "chain");
  STRIDER_ASSIGN_OR_RETURN(TensorView mid, intermediate_view(r, intermediate_));
  const KernelRequest pointwise{r.graph, parts.pointwise, {r.inputs[0], r.inputs[1], r.inputs[2]}, {mid}};
  const KernelRequest depthwise{r.graph, parts.depthwise, {mid, r.inputs[3], r.inputs[4]}, {r.outputs[0]}};
  STRIDER_ASSIGN_OR_RETURN(pointwise_, make_conv(pointwise));
  STRIDER_ASSIGN_OR_RETURN(depthwise_, make_conv(depthwise));
  return Status::ok();
}

// Both parts resolved over the node's views. The intermediate has no memory here: its view
// gives the setups their sizes and strides only, and each band's primitives get scratch
// views of their own in its place.
Result<ChainSetup> resolve_chain(const KernelRequest& r, const ConvChainParts& parts) {
  const TensorView& x = r.inputs[0];
  TensorView mid;
  mid.dtype = x.dtype;
  mid.sizes = {x.sizes[0], r.inputs[1].sizes[0], x.sizes[2], x.sizes[3]};
  mid.strides = dense_strides_in_order_of(mid.sizes, x.strides);
  ChainSetup s;
  s.node = r.node.name;
  STRIDER_ASSIGN_OR_RETURN(s.pointwise, resolve_conv({r.graph, parts.pointwise, {x, r.inputs[1], r.inputs[2]}, {mid}}));
  STRIDER_ASSIGN_OR_RETURN(s.depthwise, resolve_conv({r.graph, parts.depthwise, {mid, r.inputs[3], r.inputs[4]}, {r.outputs[0]}}));
  s.pointwise_weights = r.constant_input(1);
  s.depthwise_weights = r.constant_input(3);
  return s;
}

bool bands_apply(const KernelRequest& r) {
  const TensorView &x = r.inputs[0], &y = r.outputs[0];
  const DType dtype = y.dtype;
  return (dtype == DType::kF32 || dtype == DType::kBF16) && x.strides[1] == 1 && y.strides[1] == 1 &&
         r.constant_input(1) && r.constant_input(3) && std::all_of(x.strides.begin(), x.strides.end(), [](int64_t s) { return s > 0; }) &&
         std::all_of(y.strides.begin(), y.strides.end(), [](int64_t s) { return s > 0; });
}

Result<std::unique_ptr<Kernel>> make_conv_chain_kernel(const KernelRequest& r) {
  STRIDER_ASSIGN_OR_RETURN(ConvChainParts parts, split_conv_chain(r.node));
  if (bands_apply(r)) {
    Result<ChainSetup> setup = resolve_chain(r, parts);
    if (setup.is_ok()) {
      auto banded = std::make_unique<BandedChain>();
      Status made = banded->init(*setup, max_parallel_threads());
      if (made.is_ok()) return std::unique_ptr<Kernel>(std::move(banded));
      if (made.code() != StatusCode::kUnsupported) return made;
    }
  }
  auto whole = std::make_unique<WholeChain>();
  STRIDER_RETURN_IF_ERROR(whole->init(r, parts));
  return std::unique_ptr<Kernel>(std::move(whole));
}

}  // namespace

void register_conv_chain_kernels(std::vector<KernelEntry>& table) {
  table.push_back({kFusedPointwiseDepthwiseOp, make_conv_chain_kernel, true});
}

}  // namespace strider::cpu
