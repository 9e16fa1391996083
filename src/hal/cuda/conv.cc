// Conv on the GPU: cuDNN's convolution with descriptors built from the views' real strides
// (NCHW channel slices in and out at full speed), weights reordered once to KRSC when the
// activations are channels-last; a 1x1 convolution over views cuDNN refuses (a channel
// slice in NHWC) runs as a cuBLASLt matmul over the same views. What neither accepts is
// refused, so the planner gives the node packed operands.
#include <cudnn.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "hal/cuda/copy.h"
#include "hal/cuda/cuda_kernels.h"
#include "hal/cuda/device_buffer.h"
#include "hal/cuda/epilogue.h"
#include "hal/cuda/lt_matmul.h"
#include "hal/cuda/own_conv.h"
#include "hal/cuda/timed_choice.h"
#include "ops/shape_ops.h"

namespace strider::cuda {
namespace {

using KernelPtr = std::unique_ptr<Kernel>;
constexpr size_t kMaxWorkspace = size_t(256) << 20;

Status dnn(cudnnStatus_t status, const char* what) {
  if (status == CUDNN_STATUS_SUCCESS) return Status::ok();
  std::string message = fmt::format("cuDNN: {}: {}", what, cudnnGetErrorString(status));
  if (status == CUDNN_STATUS_NOT_SUPPORTED || status == CUDNN_STATUS_BAD_PARAM) return unsupported(message);
  return device_error(message);
}

std::optional<cudnnDataType_t> dnn_type(DType dtype) {
  switch (dtype) {
    case DType::kF32: return CUDNN_DATA_FLOAT;
    case DType::kBF16: return CUDNN_DATA_BFLOAT16;
    case DType::kF16: return CUDNN_DATA_HALF;
    default: return std::nullopt;
  }
}


Status tensor_descriptor(cudnnTensorDescriptor_t* d, cudnnDataType_t type, const TensorView& v) {
  std::vector<int> dims, strides;
  for (size_t i = 0; i < v.sizes.size(); ++i) {
    dims.push_back(int(v.sizes[i]));
    strides.push_back(int(std::max<int64_t>(v.strides[i], 1)));
  }
  STRIDER_RETURN_IF_ERROR(dnn(cudnnCreateTensorDescriptor(d), "tensor descriptor"));
  return dnn(cudnnSetTensorNdDescriptor(*d, type, int(dims.size()), dims.data(), strides.data()), "tensor descriptor");
}

class CudnnConv final : public Kernel {
 public:
  ~CudnnConv() override {
    for (cudnnTensorDescriptor_t t : {x_, y_, b_})
      if (t) cudnnDestroyTensorDescriptor(t);
    if (w_) cudnnDestroyFilterDescriptor(w_);
    if (conv_) cudnnDestroyConvolutionDescriptor(conv_);
    if (fused_activation_) cudnnDestroyActivationDescriptor(fused_activation_);
  }
  // With `activation`, the setup's epilogue (cudnn_activation's) joins the bias in cuDNN's
  // fused call; UNSUPPORTED where cuDNN has neither it nor an algorithm for it.
  Status init(const ConvSetup& c, const Tensor* constant_weights, const CudaContext& context, bool activation = false);
  Status run(const QueueContext& queue) override {
    STRIDER_RETURN_IF_ERROR(dnn(cudnnSetStream(handle_, stream_of(queue)), "set stream"));
    if (fused_bias_) return dnn(convolve(algo_), "convolution with bias");
    STRIDER_RETURN_IF_ERROR(dnn(convolve(algo_), "convolution"));
    float one = 1.0f;
    if (b_) STRIDER_RETURN_IF_ERROR(dnn(cudnnAddTensor(handle_, &one, b_, b_ptr_, &one, y_, y_ptr_), "bias"));
    return Status::ok();
  }
  std::string implementation() const override {
    return fmt::format("cudnn:algo{}{}{}", int(algo_), fused_bias_ ? "+bias" : b_ ? " then bias" : "", activation_name_);
  }

 private:
  Status filter(const ConvSetup& c, const Tensor* constant_weights, cudnnDataType_t type, bool channels_last);
  Status choose_algorithm();
  // y = conv(x, w), plus the bias in the same kernel when fused_bias_.
  cudnnStatus_t convolve(cudnnConvolutionFwdAlgo_t algo) const {
    float one = 1.0f, zero = 0.0f;
    if (fused_bias_)  // z is y with alpha2 = 0: y = identity(conv + bias)
      return cudnnConvolutionBiasActivationForward(handle_, &one, x_, x_ptr_, w_, w_ptr_, conv_, algo,
                                                   workspace_.as<void>(), workspace_.size(), &zero, y_, y_ptr_, b_,
                                                   b_ptr_, fused_activation_, y_, y_ptr_);
    return cudnnConvolutionForward(handle_, &one, x_, x_ptr_, w_, w_ptr_, conv_, algo, workspace_.as<void>(),
                                   workspace_.size(), &zero, y_, y_ptr_);
  }

  cudnnHandle_t handle_ = nullptr;
  cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr, b_ = nullptr;
  cudnnFilterDescriptor_t w_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
  cudnnConvolutionFwdAlgo_t algo_{};
  cudnnActivationDescriptor_t fused_activation_ = nullptr;  // the fused call's: identity, or init's Relu
  bool fused_bias_ = false;
  bool applies_activation_ = false;
  std::string activation_name_;  // "+relu", "+clipped-relu(6)" when it applies one
  const void *x_ptr_ = nullptr, *w_ptr_ = nullptr, *b_ptr_ = nullptr;
  void* y_ptr_ = nullptr;
  DeviceBuffer reordered_weights_, workspace_;
};

// Weights as cuDNN wants them: KCRS (the ONNX order) as they are, or reordered once to
// KRSC for channels-last activations (cuDNN's fast NHWC kernels want NHWC filters).
Status CudnnConv::filter(const ConvSetup& c, const Tensor* constant_weights, cudnnDataType_t type, bool channels_last) {
  TensorView w = at_least_4d(c.w);
  std::vector<int> dims(w.sizes.begin(), w.sizes.end());
  STRIDER_RETURN_IF_ERROR(dnn(cudnnCreateFilterDescriptor(&w_), "filter"));
  if (!channels_last || constant_weights == nullptr) {
    if (!is_packed(w) || !w.is_contiguous()) return unsupported("cuDNN filters must be dense");
    w_ptr_ = w.allocation->address() + w.byte_offset;
    return dnn(cudnnSetFilterNdDescriptor(w_, type, CUDNN_TENSOR_NCHW, int(dims.size()), dims.data()), "filter");
  }
  STRIDER_RETURN_IF_ERROR(upload_krsc_weights(w, *constant_weights, &reordered_weights_));
  w_ptr_ = reordered_weights_.as<void>();
  return dnn(cudnnSetFilterNdDescriptor(w_, type, CUDNN_TENSOR_NHWC, int(dims.size()), dims.data()), "filter");
}

}  // namespace

Status upload_krsc_weights(const TensorView& w, const Tensor& constant, DeviceBuffer* out) {
  // [K, C, spatial...] -> [K, spatial..., C] on the host, once.
  int64_t k = w.sizes[0], channels = w.sizes[1], esize = dtype_size(w.dtype);
  int64_t spatial = num_elements(std::span(w.sizes).subspan(2));
  std::vector<std::byte> reordered(constant.byte_size());
  const std::byte* source = constant.bytes();
  for (int64_t o = 0; o < k; ++o)
    for (int64_t ch = 0; ch < channels; ++ch)
      for (int64_t p = 0; p < spatial; ++p)
        std::memcpy(&reordered[size_t(((o * spatial + p) * channels + ch) * esize)],
                    source + ((o * channels + ch) * spatial + p) * esize, size_t(esize));
  return out->upload(reordered);
}

namespace {

// The fastest algorithm cuDNN ranks first that also runs on these exact views (a trial
// run at creation: cuDNN reports some stride patterns as unsupported only when it runs).
Status CudnnConv::choose_algorithm() {
  std::array<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> perf{};
  int returned = 0;
  STRIDER_RETURN_IF_ERROR(dnn(cudnnGetConvolutionForwardAlgorithm_v7(handle_, x_, w_, conv_, y_, int(perf.size()),
                                                                     &returned, perf.data()),
                              "algorithm"));
  for (int i = 0; i < returned; ++i) {
    if (perf[size_t(i)].status != CUDNN_STATUS_SUCCESS || perf[size_t(i)].memory > kMaxWorkspace) continue;
    STRIDER_RETURN_IF_ERROR(workspace_.allocate(perf[size_t(i)].memory));
    cudnnSetStream(handle_, nullptr);
    // The bias joins the convolution where cuDNN allows it (identity activation: implicit
    // precomputed GEMM only), saving a kernel per convolution; else it is a second one.
    fused_bias_ = b_ && fused_activation_ &&
                  (applies_activation_ || perf[size_t(i)].algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM);
    if (fused_bias_ && (convolve(perf[size_t(i)].algo) != CUDNN_STATUS_SUCCESS || cudaDeviceSynchronize() != cudaSuccess))
      fused_bias_ = false;
    if (applies_activation_ && !fused_bias_) continue;  // the activation comes only with the fused call
    if (!fused_bias_ && (convolve(perf[size_t(i)].algo) != CUDNN_STATUS_SUCCESS || cudaDeviceSynchronize() != cudaSuccess))
      continue;
    algo_ = perf[size_t(i)].algo;
    return Status::ok();
  }
  return unsupported("cuDNN has no convolution algorithm for these views");
}

// cuDNN's fused call's activation for an epilogue: Relu (NaN -> 0 without propagation, as
// ONNX's Relu functor gives), ReLU6-like Clip(0, high) as a clipped ReLU, and SiLU, Sigmoid
// and Tanh as swish (beta 1), sigmoid and tanh (NaN propagated, as ONNX's functors keep
// it). nullopt for anything else. Whether cuDNN's fused call takes a mode for these views
// is its trial run's answer at creation (choose_algorithm): refused, it is not offered.
// Swish, sigmoid and tanh only with STRIDER_CUDA_CUDNN_ACTIVATIONS=all until a GPU has run
// the kernel suite with them (FusedConvOwnKernelsAndLibraries forces the library path):
// a trial run's success says cuDNN took the mode, not that its values are right.
std::optional<std::pair<cudnnActivationMode_t, double>> cudnn_activation(const ConvEpilogue& e) {
  const char* modes = std::getenv("STRIDER_CUDA_CUDNN_ACTIVATIONS");
  const bool all = modes && std::string_view(modes) == "all";
  if (!all && e.activation != ConvActivation::kRelu && e.activation != ConvActivation::kClip) return std::nullopt;
  switch (e.activation) {
    case ConvActivation::kRelu: return std::make_pair(CUDNN_ACTIVATION_RELU, 0.0);
    case ConvActivation::kClip:
      if (e.low == 0.0f && e.high > 0.0f) return std::make_pair(CUDNN_ACTIVATION_CLIPPED_RELU, double(e.high));
      return std::nullopt;
    case ConvActivation::kSilu: return std::make_pair(CUDNN_ACTIVATION_SWISH, 0.0);
    case ConvActivation::kSigmoid: return std::make_pair(CUDNN_ACTIVATION_SIGMOID, 0.0);
    case ConvActivation::kTanh: return std::make_pair(CUDNN_ACTIVATION_TANH, 0.0);
    case ConvActivation::kNone:
    case ConvActivation::kGeluErf:  // the tensor-core product's alone (launch.h)
    case ConvActivation::kGeluTanh: return std::nullopt;
  }
  return std::nullopt;
}

std::string cudnn_activation_name(cudnnActivationMode_t mode, double coefficient) {
  switch (mode) {
    case CUDNN_ACTIVATION_RELU: return "+relu";
    case CUDNN_ACTIVATION_CLIPPED_RELU: return fmt::format("+clipped-relu({})", coefficient);
    case CUDNN_ACTIVATION_SWISH: return "+swish";
    case CUDNN_ACTIVATION_SIGMOID: return "+sigmoid";
    case CUDNN_ACTIVATION_TANH: return "+tanh";
    default: return "+activation";
  }
}

Status CudnnConv::init(const ConvSetup& c, const Tensor* constant_weights, const CudaContext& context, bool activation) {
  std::optional<std::pair<cudnnActivationMode_t, double>> mode = activation ? cudnn_activation(c.epilogue) : std::nullopt;
  if (activation && (!mode || !c.bias.allocation))
    return unsupported("cuDNN fuses only Relu, Clip(0, h), SiLU, Sigmoid or Tanh, with a bias");
  std::optional<cudnnDataType_t> type = dnn_type(c.y.dtype);
  if (!type) return unsupported(fmt::format("Conv on {} on CUDA", dtype_name(c.y.dtype)));
  const WindowGeometry& g = c.window;
  std::vector<int> pads, strides, dilations;
  for (size_t d = 0; d < g.kernel.size(); ++d) {
    if (g.pads_begin[d] != g.pads_end[d]) return unsupported("cuDNN needs symmetric padding");
    pads.push_back(int(g.pads_begin[d]));
    strides.push_back(int(g.strides[d]));
    dilations.push_back(int(g.dilations[d]));
  }
  if (c.x.rank() == 3) {  // the unit height added for 1-D
    pads.insert(pads.begin(), 0);
    strides.insert(strides.begin(), 1);
    dilations.insert(dilations.begin(), 1);
  }
  handle_ = static_cast<cudnnHandle_t>(context.cudnn);
  TensorView x = at_least_4d(c.x), y = at_least_4d(c.y);
  x_ptr_ = x.allocation->address() + x.byte_offset;
  y_ptr_ = y.allocation->address() + y.byte_offset;
  STRIDER_RETURN_IF_ERROR(tensor_descriptor(&x_, *type, x));
  STRIDER_RETURN_IF_ERROR(tensor_descriptor(&y_, *type, y));
  STRIDER_RETURN_IF_ERROR(filter(c, constant_weights, *type, x.strides[1] == 1 && x.sizes[1] > 1));
  STRIDER_RETURN_IF_ERROR(dnn(cudnnCreateConvolutionDescriptor(&conv_), "convolution descriptor"));
  STRIDER_RETURN_IF_ERROR(dnn(cudnnSetConvolutionNdDescriptor(conv_, int(pads.size()), pads.data(), strides.data(),
                                                              dilations.data(), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                              "convolution descriptor"));
  STRIDER_RETURN_IF_ERROR(dnn(cudnnSetConvolutionGroupCount(conv_, int(c.group)), "groups"));
  // f32 stays true f32 (FMA math, no TF32) unless allowed; bf16 and f16 use tensor cores.
  cudnnMathType_t math = *type != CUDNN_DATA_FLOAT ? CUDNN_TENSOR_OP_MATH
                         : context.allow_tf32      ? CUDNN_DEFAULT_MATH
                                                   : CUDNN_FMA_MATH;
  STRIDER_RETURN_IF_ERROR(dnn(cudnnSetConvolutionMathType(conv_, math), "math type"));
  if (c.bias.allocation) {
    // [C] as [1, C, 1, ...] matching y's rank.
    TensorView bias = insert_unit_dim(TensorView{c.bias.allocation, c.bias.byte_offset, c.bias.dtype, {c.bias.sizes[0]}, {c.bias.strides[0]}}, 0);
    while (bias.rank() < y.rank()) bias = insert_unit_dim(bias, size_t(bias.rank()));
    STRIDER_RETURN_IF_ERROR(tensor_descriptor(&b_, *type, bias));
    b_ptr_ = bias.allocation->address() + bias.byte_offset;
    STRIDER_RETURN_IF_ERROR(dnn(cudnnCreateActivationDescriptor(&fused_activation_), "activation"));
    const cudnnActivationMode_t kind = mode ? mode->first : CUDNN_ACTIVATION_IDENTITY;
    const double coefficient = mode ? mode->second : 0.0;
    const bool drops_nan = kind == CUDNN_ACTIVATION_RELU || kind == CUDNN_ACTIVATION_IDENTITY;
    const cudnnNanPropagation_t nan = drops_nan ? CUDNN_NOT_PROPAGATE_NAN : CUDNN_PROPAGATE_NAN;
    STRIDER_RETURN_IF_ERROR(
        dnn(cudnnSetActivationDescriptor(fused_activation_, kind, nan, coefficient), "activation"));
    if (kind == CUDNN_ACTIVATION_SWISH)
      STRIDER_RETURN_IF_ERROR(dnn(cudnnSetActivationDescriptorSwishBeta(fused_activation_, 1.0), "swish beta"));
    applies_activation_ = mode.has_value();
    if (mode) activation_name_ = cudnn_activation_name(kind, coefficient);
  }
  return choose_algorithm();
}

// A pointwise convolution as a cuBLASLt matmul; a column bias (channels-first) is added by
// cuDNN afterwards.
class PointwiseConv final : public Kernel {
 public:
  PointwiseConv(KernelPtr matmul) : matmul_(std::move(matmul)) {}
  Status add_column_bias(const ConvSetup& c, const CudaContext& context) {
    handle_ = static_cast<cudnnHandle_t>(context.cudnn);
    cudnnDataType_t type = *dnn_type(c.y.dtype);
    TensorView y = at_least_4d(c.y);
    TensorView bias = insert_unit_dim(TensorView{c.bias.allocation, c.bias.byte_offset, c.bias.dtype, {c.bias.sizes[0]}, {c.bias.strides[0]}}, 0);
    while (bias.rank() < y.rank()) bias = insert_unit_dim(bias, size_t(bias.rank()));
    STRIDER_RETURN_IF_ERROR(tensor_descriptor(&y_, type, y));
    STRIDER_RETURN_IF_ERROR(tensor_descriptor(&b_, type, bias));
    y_ptr_ = y.allocation->address() + y.byte_offset;
    b_ptr_ = bias.allocation->address() + bias.byte_offset;
    return Status::ok();
  }
  ~PointwiseConv() override {
    if (y_) cudnnDestroyTensorDescriptor(y_);
    if (b_) cudnnDestroyTensorDescriptor(b_);
  }
  Status run(const QueueContext& queue) override {
    STRIDER_RETURN_IF_ERROR(matmul_->run(queue));
    if (!b_) return Status::ok();
    float one = 1.0f;
    STRIDER_RETURN_IF_ERROR(dnn(cudnnSetStream(handle_, stream_of(queue)), "set stream"));
    return dnn(cudnnAddTensor(handle_, &one, b_, b_ptr_, &one, y_, y_ptr_), "bias");
  }
  std::string implementation() const override { return matmul_->implementation() + (b_ ? "+cudnn-bias" : ""); }

 private:
  KernelPtr matmul_;
  cudnnHandle_t handle_ = nullptr;
  cudnnTensorDescriptor_t y_ = nullptr, b_ = nullptr;
  void* y_ptr_ = nullptr;
  const void* b_ptr_ = nullptr;
};

std::optional<KernelPtr> pointwise_kernel(const ConvSetup& c, const CudaContext& context, const std::string& node) {
  const TensorView* bias = c.bias.allocation ? &c.bias : nullptr;
  for (const PointwiseMatMul& m : pointwise_conv_as_matmul(c.x, c.w, bias, c.y, c.group, c.window)) {
    auto matmul = make_lt_matmul(m.views, bias && m.row_bias ? &m.bias : nullptr, 1.0f, context, node, nullptr, 0.0f,
                                 /*time_algorithms=*/true);
    if (!matmul.is_ok()) continue;
    auto kernel = std::make_unique<PointwiseConv>(std::move(matmul).value());
    if (bias && !m.row_bias && !kernel->add_column_bias(c, context).is_ok()) continue;
    return KernelPtr(std::move(kernel));
  }
  return std::nullopt;
}

// What the choice among a node's kernels depends on: shapes, strides, dtype, window.
std::string choice_key(const ConvSetup& c, int ordinal) {
  return fmt::format("Conv dev{} {} x{}:{} w{} y{}:{} g{} k{} s{} p{} d{}", ordinal, dtype_name(c.y.dtype),
                     shape_to_string(c.x.sizes), shape_to_string(c.x.strides), shape_to_string(c.w.sizes),
                     shape_to_string(c.y.sizes), shape_to_string(c.y.strides), c.group,
                     shape_to_string(c.window.kernel), shape_to_string(c.window.strides),
                     shape_to_string(c.window.pads_begin), shape_to_string(c.window.dilations));
}

Result<ConvSetup> conv_setup(const KernelRequest& r) {
  ConvSetup c;
  c.x = r.inputs[0];
  c.w = r.inputs[1];
  if (r.has_input(2)) c.bias = r.inputs[2];
  c.y = r.outputs[0];
  STRIDER_ASSIGN_OR_RETURN(c.group, r.node.attributes.get_int("group", 1));
  std::span<const int64_t> spatial(c.x.sizes.begin() + 2, c.x.sizes.end());
  std::span<const int64_t> kernel(c.w.sizes.begin() + 2, c.w.sizes.end());
  STRIDER_ASSIGN_OR_RETURN(c.window, resolve_window(NodeInputs(r.graph, r.node), spatial, kernel, false));
  if (!dnn_type(c.y.dtype)) return unsupported(fmt::format("Conv on {} on CUDA", dtype_name(c.y.dtype)));
  return c;
}

// A kernel that owns the buffer its inner kernels pass a value through.
class WithScratch final : public Kernel {
 public:
  DeviceBuffer buffer;
  std::unique_ptr<Allocation> allocation;
  KernelPtr inner;
  Status run(const QueueContext& queue) override { return inner->run(queue); }
  std::string implementation() const override { return inner->implementation(); }
  Status check_completed() override { return inner->check_completed(); }
};

// cuDNN over a packed copy of x, made by the kernel before each convolution into memory of
// its own: on an NCHW channel slice (C2f's chunks, read in place) cuDNN's f32 kernels ran
// 2-4x slower than on the same values dense (session 40, H100, YOLOv8n b32: 32 -> 32
// channels 3x3 at 40x40, 0.178 ms sliced against 0.047 dense), which is what torch's
// convolutions do (they make their input contiguous). x is only read, in the same stream
// just before the convolution; y is written in place as by the plain call. Timed against
// the rest, so the copy's memory is kept only where it wins. f32 over channels-first x
// only: offered for every dtype and layout, it was picked in bf16 and made YOLOv8n b32
// bf16 (1.094 -> 1.156 ms) and C2f b32 bf16 (0.13 -> 0.18) slower in their graphs, through
// bf16 itself or through channels-last slices, where it stood in for the planner's own
// packed operand (a Materialize, which the tensor-core kernels can take): not separated.
// STRIDER_CUDA_PACKED_CONV=off withdraws it (A/B timing).
class PackedInputConv final : public Kernel {
 public:
  // `activation`: as CudnnConv::init's (the epilogue in cuDNN's fused call).
  Status init(const ConvSetup& c, const KernelRequest& r, const CudaContext& context, bool activation) {
    const int64_t bytes = c.x.num_elements() * dtype_size(c.x.dtype);
    STRIDER_RETURN_IF_ERROR(buffer_.allocate(size_t(bytes)));
    allocation_ = std::make_unique<Allocation>(0, "convolution's packed input", "cuda", buffer_.as<std::byte>(), bytes, 256,
                                               StorageMode::kDevice, false);
    ConvSetup packed = c;
    STRIDER_ASSIGN_OR_RETURN(packed.x, make_view(*allocation_, 0, c.x.dtype, c.x.sizes,
                                                 dense_strides_in_order_of(c.x.sizes, c.x.strides), "packed input"));
    STRIDER_RETURN_IF_ERROR(prepare_copy(packed.x, c.x, &copy_));
    auto conv = std::make_unique<CudnnConv>();
    STRIDER_RETURN_IF_ERROR(conv->init(packed, r.constant_input(1), context, activation));
    conv_ = std::move(conv);
    return Status::ok();
  }
  Status run(const QueueContext& queue) override {
    STRIDER_RETURN_IF_ERROR(run_copy(copy_, stream_of(queue)));
    return conv_->run(queue);
  }
  std::string implementation() const override { return "packed-x " + conv_->implementation(); }

 private:
  DeviceBuffer buffer_;
  std::unique_ptr<Allocation> allocation_;
  CopyLaunch copy_;
  KernelPtr conv_;
};

std::optional<KernelPtr> packed_input_conv(const ConvSetup& c, const KernelRequest& r, const CudaContext& context,
                                           bool activation) {
  if (c.x.dtype != DType::kF32 || is_packed(c.x) || may_overlap(c.x, c.y)) return std::nullopt;
  if (c.x.strides[1] == 1 && c.x.sizes[1] > 1) return std::nullopt;  // channels-last
  if (const char* offer = std::getenv("STRIDER_CUDA_PACKED_CONV"); offer && std::string_view(offer) == "off") return std::nullopt;
  auto kernel = std::make_unique<PackedInputConv>();
  if (!kernel->init(c, r, context, activation).is_ok()) return std::nullopt;
  return KernelPtr(std::move(kernel));
}

// The fastest of every kernel that takes these views (timed_choice.h): which is fastest
// depends on shape, dtype and layout, and cuDNN's own ranking was far off for bf16
// depthwise, first-layer and Conv1d shapes. With a FusedConv's `program`, the own kernels
// apply it before they store when it is an activation they have (c.epilogue); any
// other candidate is followed by it as one map over the output (epilogue.h), and is timed so.
Result<KernelPtr> choose_conv(const ConvSetup& c, const KernelRequest& r, const CudaContext& context,
                              const FusedProgram* program, const std::vector<TensorView>& operands) {
  std::vector<KernelPtr> candidates;
  Status refused = Status::ok();
  auto offer = [&](KernelPtr kernel, bool applies_program) {
    if (program && !applies_program) {
      Result<KernelPtr> then = then_program(std::move(kernel), *program, c.y, operands);
      if (!then.is_ok()) return (void)(refused = then.status());
      kernel = std::move(then).value();
    }
    candidates.push_back(std::move(kernel));
  };
  if (std::optional<KernelPtr> k = pointwise_kernel(c, context, r.node.name)) offer(std::move(*k), false);
  for (KernelPtr& k : depthwise_conv_kernels(c, r)) offer(std::move(k), c.epilogue.activation != ConvActivation::kNone);
  if (std::optional<KernelPtr> k = direct_conv_kernel(c, r)) offer(std::move(*k), c.epilogue.activation != ConvActivation::kNone);
  for (KernelPtr& k : small_conv_kernels(c, r)) offer(std::move(k), c.epilogue.activation != ConvActivation::kNone);
  for (KernelPtr& k : tiled_conv_kernels(c, r)) offer(std::move(k), c.epilogue.activation != ConvActivation::kNone);
  // The tensor-core kernel also adds a program's addends (a residual) before it stores.
  std::vector<TensorView> addends;
  std::optional<std::vector<int>> added = program ? as_added_operands(*program) : std::nullopt;
  for (int reg : added.value_or(std::vector<int>{})) addends.push_back(operands[size_t(reg - 1)]);
  if (std::optional<KernelPtr> k = mma_conv_kernel(c, r, addends))
    offer(std::move(*k), c.epilogue.activation != ConvActivation::kNone || added.has_value());
  // conv -> bias -> activation as one cuDNN graph, each engine that passed its check.
  if (program)
    for (KernelPtr& k : cudnn_graph_conv_kernels(c, r, context)) offer(std::move(k), true);
  // The activation in cuDNN's own call where it has it, offered before the plain call so
  // that STRIDER_CUDA_KERNEL_CHOICE=library (the tests) takes it.
  if (program && cudnn_activation(c.epilogue)) {
    auto fused = std::make_unique<CudnnConv>();
    if (fused->init(c, r.constant_input(1), context, true).is_ok()) offer(std::move(fused), true);
  }
  auto conv = std::make_unique<CudnnConv>();
  Status cudnn = conv->init(c, r.constant_input(1), context);
  if (cudnn.is_ok()) offer(std::move(conv), false);
  if (std::optional<KernelPtr> k = packed_input_conv(c, r, context, false)) offer(std::move(*k), false);
  if (program && cudnn_activation(c.epilogue))
    if (std::optional<KernelPtr> k = packed_input_conv(c, r, context, true)) offer(std::move(*k), true);
  if (candidates.empty()) return cudnn.is_ok() ? refused : cudnn;
  std::string key = choice_key(c, context.ordinal);
  if (program) key += " then " + describe_fused_program(*program);
  return fastest_kernel(key, std::move(candidates));
}

Result<KernelPtr> make_conv(const KernelRequest& r, const CudaContext& context) {
  STRIDER_ASSIGN_OR_RETURN(ConvSetup c, conv_setup(r));
  return choose_conv(c, r, context, nullptr, {});
}

// FusedConv (ops/fused_elementwise.h): X, W, B, then the program's other operands;
// register 0 is the convolution's result.
Result<KernelPtr> make_fused_conv(const KernelRequest& r, const CudaContext& context) {
  STRIDER_ASSIGN_OR_RETURN(ConvSetup c, conv_setup(r));
  const size_t extra = r.inputs.size() > 3 ? r.inputs.size() - 3 : 0;
  STRIDER_ASSIGN_OR_RETURN(FusedProgram program, read_fused_program_of(r.node, 1 + int(extra)));
  const std::vector<TensorView> operands(r.inputs.end() - long(extra), r.inputs.end());
  if (std::optional<ConvEpilogue> epilogue = conv_epilogue_of(program)) c.epilogue = *epilogue;
  return choose_conv(c, r, context, &program, operands);
}

// A FusedGatedConv's gate as the tensor-core kernel applies it: tanh(x0) * sigmoid(x1),
// plus at most one addend with y's layout: that addend (or none), else nullopt.
std::optional<std::vector<TensorView>> gate_addends(const FusedProgram& program, const std::vector<TensorView>& operands,
                                                    const TensorView& y) {
  const std::string text = describe_fused_program(program);
  for (const char* gate : {"Mul(Tanh(x0), Sigmoid(x1))", "Mul(Sigmoid(x1), Tanh(x0))"}) {
    if (text == gate && operands.empty()) return std::vector<TensorView>{};
    const std::string plus_first = fmt::format("Add(x2, {})", gate), plus_last = fmt::format("Add({}, x2)", gate);
    if ((text == plus_first || text == plus_last) && operands.size() == 1 && operands[0].dtype == y.dtype &&
        has_layout_of(operands[0], y))
      return operands;
  }
  return std::nullopt;
}

// The convolution's 2K channels into a buffer the kernel owns (packed, in y's dim order),
// by the fastest plain convolution, then the gate as one map over its halves into y. A
// window padded less at its end than at its start (a chomp the pass folded into the end
// padding) is padded alike at both ends here, as cuDNN wants, and the gate reads the
// first outputs.
Result<KernelPtr> conv_then_gate(const ConvSetup& c, const KernelRequest& r, const CudaContext& context,
                                 const FusedProgram& program, const std::vector<TensorView>& operands) {
  const size_t rank = size_t(c.y.rank());
  ConvSetup full = c;
  full.epilogue = ConvEpilogue{};
  Shape sizes = c.y.sizes;
  sizes[1] *= 2;
  WindowGeometry& g = full.window;
  for (size_t d = 0; d < g.kernel.size(); ++d) {
    if (g.pads_end[d] >= g.pads_begin[d]) continue;
    g.pads_end[d] = g.pads_begin[d];
    const int64_t in = c.x.sizes[2 + d], reach = g.dilations[d] * (g.kernel[d] - 1) + 1;
    g.output[d] = sizes[2 + d] = (in + g.pads_begin[d] + g.pads_end[d] - reach) / g.strides[d] + 1;
  }
  const Strides strides = dense_strides_in_order_of(sizes, c.y.strides);
  const int64_t span = num_elements(sizes);
  auto staged = std::make_unique<WithScratch>();
  const int64_t bytes = span * dtype_size(c.y.dtype);
  STRIDER_RETURN_IF_ERROR(staged->buffer.allocate(size_t(bytes)));
  staged->allocation = std::make_unique<Allocation>(0, "gated convolution's channels", "cuda",
                                                    staged->buffer.as<std::byte>(), bytes, 256, StorageMode::kDevice, false);
  STRIDER_ASSIGN_OR_RETURN(full.y, make_view(*staged->allocation, 0, c.y.dtype, sizes, strides, "gated channels"));
  STRIDER_ASSIGN_OR_RETURN(KernelPtr conv, choose_conv(full, r, context, nullptr, {}));
  std::vector<TensorView> registers(2);
  TensorView kept = full.y;  // the outputs y has
  for (size_t d = 2; d < rank; ++d) {
    STRIDER_ASSIGN_OR_RETURN(kept, slice_view(kept, int64_t(d), 0, c.y.sizes[d], 1));
  }
  STRIDER_ASSIGN_OR_RETURN(registers[0], slice_view(kept, 1, 0, c.y.sizes[1], 1));
  STRIDER_ASSIGN_OR_RETURN(registers[1], slice_view(kept, 1, c.y.sizes[1], sizes[1], 1));
  for (const TensorView& operand : operands) {
    STRIDER_ASSIGN_OR_RETURN(TensorView b, broadcast_view(operand, c.y.sizes));
    registers.push_back(std::move(b));
  }
  STRIDER_ASSIGN_OR_RETURN(staged->inner, then_program_over(std::move(conv), program, c.y, std::move(registers)));
  return KernelPtr(std::move(staged));
}

// FusedGatedConv (ops/fused_elementwise.h): X, W, B, then the gate's other operands;
// registers 0 and 1 are the convolution's two halves of channels. The tensor-core kernel
// applies the gate to its accumulators and writes only y; any convolution followed by the
// gate as a map is the fallback (f32, channels-first views), timed against it.
Result<KernelPtr> make_fused_gated_conv(const KernelRequest& r, const CudaContext& context) {
  STRIDER_ASSIGN_OR_RETURN(ConvSetup c, conv_setup(r));  // c.y: the gate's output, K channels
  const size_t extra = r.inputs.size() > 3 ? r.inputs.size() - 3 : 0;
  STRIDER_ASSIGN_OR_RETURN(FusedProgram program, read_fused_program_of(r.node, 2 + int(extra)));
  const std::vector<TensorView> operands(r.inputs.end() - long(extra), r.inputs.end());
  std::vector<KernelPtr> candidates;
  if (std::optional<std::vector<TensorView>> addends = gate_addends(program, operands, c.y))
    if (std::optional<KernelPtr> k = mma_conv_kernel(c, r, *addends, true)) candidates.push_back(std::move(*k));
  Result<KernelPtr> staged = conv_then_gate(c, r, context, program, operands);
  if (staged.is_ok()) candidates.push_back(std::move(staged).value());
  if (candidates.empty()) return staged.status();
  return fastest_kernel(choice_key(c, context.ordinal) + " gated by " + describe_fused_program(program),
                        std::move(candidates));
}

}  // namespace

void register_conv_kernels(std::vector<KernelEntry>& table) {
  table.push_back({"Conv", make_conv});
  table.push_back({kFusedConvOp, make_fused_conv});
  table.push_back({kFusedGatedConvOp, make_fused_gated_conv});
}

}  // namespace strider::cuda
