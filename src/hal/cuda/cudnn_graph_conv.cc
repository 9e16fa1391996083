// A convolution, its bias and its activation as one cuDNN operation graph (the backend
// API): cuDNN's runtime-fusion engines compile conv -> add bias -> activation into one
// kernel, so the activation costs no pass over memory. The legacy fused call
// (cudnnConvolutionBiasActivationForward) has only Relu and a clipped Relu, and for the
// clipped one ran the activation as a kernel of its own; MobileNetV2's ReLU6 after its 1x1
// convolutions was 28% of its bf16 batch-32 time as a separate map.
//
// Where it is offered (cudnn_graph_conv_kernels; STRIDER_CUDNN_GRAPH=off for none): bf16 or f16, 2-D, one group, a bias,
// constant weights (reordered once to KRSC), and x and y both packed channels-last. Packed
// y only: one cuDNN graph engine was seen writing bf16 channel slices outside their view,
// so a strided output is never handed to one. Even so, every engine is checked before it
// is offered: it runs once into a scratch copy of y with guard bytes on both sides, and an
// engine that touched a guard byte is dropped (verify_stays_inside).
//
// Numerics: the convolution accumulates in f32, the bias and the activation apply to that
// f32 value (virtual f32 tensors), and only the result is rounded to y's dtype: closer to
// the float64 reference than conv, round, add bias, round, activate, round.
#include <cudnn.h>
#include <fmt/format.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "hal/cuda/cuda_kernels.h"
#include "hal/cuda/device_buffer.h"
#include "hal/cuda/own_conv.h"

namespace strider::cuda {
namespace {

constexpr size_t kMaxGraphWorkspace = size_t(256) << 20;
constexpr size_t kGuardBytes = 4096;
constexpr int kMaxEnginesOffered = 3;  // the heuristic's first few that build: timed against the rest

Status graph_status(cudnnStatus_t status, const char* what) {
  if (status == CUDNN_STATUS_SUCCESS) return Status::ok();
  std::string message = fmt::format("cuDNN graph: {}: {}", what, cudnnGetErrorString(status));
  if (status == CUDNN_STATUS_INTERNAL_ERROR || status == CUDNN_STATUS_EXECUTION_FAILED) return device_error(message);
  return unsupported(message);  // NOT_SUPPORTED, BAD_PARAM and the like: this graph is not for cuDNN
}

// One backend descriptor, destroyed with its owner.
class Descriptor {
 public:
  Descriptor() = default;
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  Descriptor(Descriptor&& other) noexcept : d_(std::exchange(other.d_, nullptr)) {}
  ~Descriptor() {
    if (d_) cudnnBackendDestroyDescriptor(d_);
  }
  Status create(cudnnBackendDescriptorType_t type) { return graph_status(cudnnBackendCreateDescriptor(type, &d_), "create"); }
  template <typename T>
  Status set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const T* values, int64_t count = 1) {
    return graph_status(cudnnBackendSetAttribute(d_, name, type, count, values), "set attribute");
  }
  Status finalize() { return graph_status(cudnnBackendFinalize(d_), "finalize"); }
  cudnnBackendDescriptor_t get() const { return d_; }
  cudnnBackendDescriptor_t* address() { return &d_; }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

enum Uid : int64_t { kX = 1, kW, kBias, kY, kConvOut, kBiasOut };

// The largest power of two (at most 16) that divides the address: what cuDNN may assume.
int64_t alignment_of(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  int64_t align = 16;
  while (align > 1 && a % uintptr_t(align) != 0) align /= 2;
  return align;
}

Status tensor(Descriptor* d, int64_t uid, cudnnDataType_t type, const std::array<int64_t, 4>& dims,
              const std::array<int64_t, 4>& strides, int64_t alignment, bool is_virtual) {
  STRIDER_RETURN_IF_ERROR(d->create(CUDNN_BACKEND_TENSOR_DESCRIPTOR));
  STRIDER_RETURN_IF_ERROR(d->set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &type));
  STRIDER_RETURN_IF_ERROR(d->set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims.data(), 4));
  STRIDER_RETURN_IF_ERROR(d->set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides.data(), 4));
  STRIDER_RETURN_IF_ERROR(d->set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid));
  STRIDER_RETURN_IF_ERROR(d->set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &alignment));
  STRIDER_RETURN_IF_ERROR(d->set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, &is_virtual));
  return d->finalize();
}

std::array<int64_t, 4> dims_of(const TensorView& v) { return {v.sizes[0], v.sizes[1], v.sizes[2], v.sizes[3]}; }
std::array<int64_t, 4> strides_of(const TensorView& v) { return {v.strides[0], v.strides[1], v.strides[2], v.strides[3]}; }

// The pointwise op after the bias, for an epilogue cuDNN's graph has; nullopt otherwise.
struct GraphActivation {
  cudnnPointwiseMode_t mode;
  float lower = 0, upper = 0;  // RELU_FWD's clips (upper 0: none)
  const char* name;
};
std::optional<GraphActivation> graph_activation(const ConvEpilogue& e) {
  switch (e.activation) {
    case ConvActivation::kRelu: return GraphActivation{CUDNN_POINTWISE_RELU_FWD, 0, 0, "relu"};
    case ConvActivation::kClip:
      if (e.low != 0.0f || !(e.high > 0.0f)) return std::nullopt;
      return GraphActivation{CUDNN_POINTWISE_RELU_FWD, 0, e.high, "relu6"};
    case ConvActivation::kSilu: return GraphActivation{CUDNN_POINTWISE_SWISH_FWD, 0, 0, "silu"};
    case ConvActivation::kSigmoid: return GraphActivation{CUDNN_POINTWISE_SIGMOID_FWD, 0, 0, "sigmoid"};
    case ConvActivation::kTanh: return GraphActivation{CUDNN_POINTWISE_TANH_FWD, 0, 0, "tanh"};
    case ConvActivation::kNone:
    case ConvActivation::kGeluErf:  // the tensor-core product's alone (launch.h)
    case ConvActivation::kGeluTanh: return std::nullopt;
  }
  return std::nullopt;
}

// A pointwise operation: y = mode(x) or y = mode(x, b), in f32.
Status pointwise(Descriptor* op, Descriptor* mode_desc, const GraphActivation& a, const Descriptor& x,
                 const Descriptor* b, const Descriptor& y) {
  cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
  STRIDER_RETURN_IF_ERROR(mode_desc->create(CUDNN_BACKEND_POINTWISE_DESCRIPTOR));
  STRIDER_RETURN_IF_ERROR(mode_desc->set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, &a.mode));
  STRIDER_RETURN_IF_ERROR(mode_desc->set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, &f32));
  if (a.mode == CUDNN_POINTWISE_RELU_FWD) {
    // As the elementwise table's: Clip keeps a NaN, Relu makes it 0 (conv.cc's fused call too).
    const cudnnNanPropagation_t nan = a.upper > 0 ? CUDNN_PROPAGATE_NAN : CUDNN_NOT_PROPAGATE_NAN;
    STRIDER_RETURN_IF_ERROR(mode_desc->set(CUDNN_ATTR_POINTWISE_NAN_PROPAGATION, CUDNN_TYPE_NAN_PROPOGATION, &nan));
    STRIDER_RETURN_IF_ERROR(mode_desc->set(CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP, CUDNN_TYPE_FLOAT, &a.lower));
    if (a.upper > 0) STRIDER_RETURN_IF_ERROR(mode_desc->set(CUDNN_ATTR_POINTWISE_RELU_UPPER_CLIP, CUDNN_TYPE_FLOAT, &a.upper));
  }
  if (a.mode == CUDNN_POINTWISE_SWISH_FWD) {
    const float beta = 1.0f;
    STRIDER_RETURN_IF_ERROR(mode_desc->set(CUDNN_ATTR_POINTWISE_SWISH_BETA, CUDNN_TYPE_FLOAT, &beta));
  }
  STRIDER_RETURN_IF_ERROR(mode_desc->finalize());
  STRIDER_RETURN_IF_ERROR(op->create(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR));
  STRIDER_RETURN_IF_ERROR(op->set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, mode_desc->address()));
  cudnnBackendDescriptor_t xd = x.get(), yd = y.get();
  STRIDER_RETURN_IF_ERROR(op->set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &xd));
  if (b) {
    cudnnBackendDescriptor_t bd = b->get();
    STRIDER_RETURN_IF_ERROR(op->set(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &bd));
  }
  STRIDER_RETURN_IF_ERROR(op->set(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &yd));
  return op->finalize();
}

// The operation graph conv -> add bias -> activation over the setup's views, and the
// heuristic's engine configurations for it, best first.
class FusedConvGraph {
 public:
  Status build(const ConvSetup& c, const void* w_krsc, cudnnHandle_t handle, const GraphActivation& act);
  Result<std::vector<Descriptor>> engine_configs();
  Result<std::vector<Descriptor>> engine_configs(cudnnBackendHeurMode_t mode);
  cudnnBackendDescriptor_t graph() const { return graph_.get(); }

 private:
  Descriptor x_, w_, bias_, y_, conv_out_, bias_out_, conv_, conv_op_, add_, add_op_, act_, act_op_, graph_;
};

Status FusedConvGraph::build(const ConvSetup& c, const void* w_krsc, cudnnHandle_t handle, const GraphActivation& act) {
  const cudnnDataType_t type = c.y.dtype == DType::kBF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF, f32 = CUDNN_DATA_FLOAT;
  const int64_t k = c.w.sizes[0], ch = c.w.sizes[1], r = c.w.sizes[2], s = c.w.sizes[3];
  auto address = [](const TensorView& v) { return v.allocation->address() + v.byte_offset; };
  STRIDER_RETURN_IF_ERROR(tensor(&x_, kX, type, dims_of(c.x), strides_of(c.x), alignment_of(address(c.x)), false));
  STRIDER_RETURN_IF_ERROR(tensor(&w_, kW, type, {k, ch, r, s}, {r * s * ch, 1, s * ch, ch}, alignment_of(w_krsc), false));
  STRIDER_RETURN_IF_ERROR(tensor(&bias_, kBias, type, {1, k, 1, 1}, {k, 1, k, k}, alignment_of(address(c.bias)), false));
  STRIDER_RETURN_IF_ERROR(tensor(&y_, kY, type, dims_of(c.y), strides_of(c.y), alignment_of(address(c.y)), false));
  STRIDER_RETURN_IF_ERROR(tensor(&conv_out_, kConvOut, f32, dims_of(c.y), strides_of(c.y), 16, true));
  STRIDER_RETURN_IF_ERROR(tensor(&bias_out_, kBiasOut, f32, dims_of(c.y), strides_of(c.y), 16, true));

  const WindowGeometry& g = c.window;
  const int64_t spatial = 2;
  std::array<int64_t, 2> pre{g.pads_begin[0], g.pads_begin[1]}, post{g.pads_end[0], g.pads_end[1]},
      stride{g.strides[0], g.strides[1]}, dilation{g.dilations[0], g.dilations[1]};
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  STRIDER_RETURN_IF_ERROR(conv_.create(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR));
  STRIDER_RETURN_IF_ERROR(conv_.set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &f32));
  STRIDER_RETURN_IF_ERROR(conv_.set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, &mode));
  STRIDER_RETURN_IF_ERROR(conv_.set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, &spatial));
  STRIDER_RETURN_IF_ERROR(conv_.set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, dilation.data(), 2));
  STRIDER_RETURN_IF_ERROR(conv_.set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, stride.data(), 2));
  STRIDER_RETURN_IF_ERROR(conv_.set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, pre.data(), 2));
  STRIDER_RETURN_IF_ERROR(conv_.set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, post.data(), 2));
  STRIDER_RETURN_IF_ERROR(conv_.finalize());

  const float one = 1.0f, zero = 0.0f;
  cudnnBackendDescriptor_t xd = x_.get(), wd = w_.get(), od = conv_out_.get(), cd = conv_.get();
  STRIDER_RETURN_IF_ERROR(conv_op_.create(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR));
  STRIDER_RETURN_IF_ERROR(conv_op_.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, &xd));
  STRIDER_RETURN_IF_ERROR(conv_op_.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, &wd));
  STRIDER_RETURN_IF_ERROR(conv_op_.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_TYPE_BACKEND_DESCRIPTOR, &od));
  STRIDER_RETURN_IF_ERROR(conv_op_.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &cd));
  STRIDER_RETURN_IF_ERROR(conv_op_.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, &one));
  STRIDER_RETURN_IF_ERROR(conv_op_.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, &zero));
  STRIDER_RETURN_IF_ERROR(conv_op_.finalize());
  STRIDER_RETURN_IF_ERROR(pointwise(&add_op_, &add_, GraphActivation{CUDNN_POINTWISE_ADD, 0, 0, "add"}, conv_out_, &bias_, bias_out_));
  STRIDER_RETURN_IF_ERROR(pointwise(&act_op_, &act_, act, bias_out_, nullptr, y_));

  std::array<cudnnBackendDescriptor_t, 3> ops{conv_op_.get(), add_op_.get(), act_op_.get()};
  STRIDER_RETURN_IF_ERROR(graph_.create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR));
  STRIDER_RETURN_IF_ERROR(graph_.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, ops.data(), 3));
  STRIDER_RETURN_IF_ERROR(graph_.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, &handle));
  return graph_.finalize();
}

// The first heuristic mode that proposes any engine: mode A proposed none for conv ->
// bias -> ReLU with an upper clip (MobileNetV2's ReLU6) on an H100, where its 1x1
// convolutions then ran as a product and a map, two passes over the output.
Result<std::vector<Descriptor>> FusedConvGraph::engine_configs() {
  Result<std::vector<Descriptor>> configs = engine_configs(CUDNN_HEUR_MODE_A);
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_B, CUDNN_HEUR_MODE_FALLBACK}) {
    if (!configs.is_ok() || !configs->empty()) return configs;
    configs = engine_configs(mode);
  }
  return configs;
}

Result<std::vector<Descriptor>> FusedConvGraph::engine_configs(cudnnBackendHeurMode_t mode) {
  Descriptor heuristics;
  cudnnBackendDescriptor_t g = graph_.get();
  STRIDER_RETURN_IF_ERROR(heuristics.create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR));
  STRIDER_RETURN_IF_ERROR(heuristics.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, &g));
  STRIDER_RETURN_IF_ERROR(heuristics.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode));
  STRIDER_RETURN_IF_ERROR(heuristics.finalize());
  int64_t count = 0;
  STRIDER_RETURN_IF_ERROR(graph_status(
      cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
      "heuristic results"));
  std::vector<Descriptor> configs(size_t(std::max<int64_t>(count, 0)));
  std::vector<cudnnBackendDescriptor_t> raw;
  for (Descriptor& d : configs) {
    STRIDER_RETURN_IF_ERROR(d.create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    raw.push_back(d.get());
  }
  int64_t got = 0;
  STRIDER_RETURN_IF_ERROR(graph_status(cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                                CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, raw.data()),
                                       "heuristic results"));
  configs.resize(size_t(std::clamp<int64_t>(got, 0, count)));
  return configs;
}

// The engine's global index, for the kernel's name (-1 when cuDNN does not say).
int64_t engine_index(const Descriptor& config) {
  Descriptor engine;
  if (!engine.create(CUDNN_BACKEND_ENGINE_DESCRIPTOR).is_ok()) return -1;
  int64_t n = 0, index = -1;
  if (cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n,
                               engine.address()) != CUDNN_STATUS_SUCCESS)
    return -1;
  if (cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &index) !=
      CUDNN_STATUS_SUCCESS)
    return -1;
  return index;
}

class GraphConv final : public Kernel {
 public:
  // Takes the graph (shared by the engines offered), one finalized plan and its workspace.
  GraphConv(std::shared_ptr<FusedConvGraph> graph, std::shared_ptr<DeviceBuffer> weights, Descriptor plan,
            cudnnHandle_t handle, std::string name)
      : graph_(std::move(graph)), weights_(std::move(weights)), plan_(std::move(plan)), handle_(handle),
        name_(std::move(name)) {}
  Status prepare(const ConvSetup& c, size_t workspace_bytes);
  // Runs the plan once into a scratch y with guard bytes around it; UNSUPPORTED if it
  // wrote any guard byte (or failed).
  Status verify_stays_inside(const ConvSetup& c);
  Status run(const QueueContext& queue) override {
    STRIDER_RETURN_IF_ERROR(graph_status(cudnnSetStream(handle_, stream_of(queue)), "set stream"));
    return graph_status(cudnnBackendExecute(handle_, plan_.get(), pack_.get()), "execute");
  }
  std::string implementation() const override { return name_; }

 private:
  Status make_pack(Descriptor* pack, void* y);

  std::shared_ptr<FusedConvGraph> graph_;
  std::shared_ptr<DeviceBuffer> weights_;
  Descriptor plan_, pack_;
  cudnnHandle_t handle_;
  std::string name_;
  DeviceBuffer workspace_;
  std::array<void*, 4> pointers_{};  // x, w, bias, y
};

Status GraphConv::make_pack(Descriptor* pack, void* y) {
  std::array<int64_t, 4> uids{kX, kW, kBias, kY};
  std::array<void*, 4> pointers{pointers_[0], pointers_[1], pointers_[2], y};
  void* workspace = workspace_.as<void>();
  STRIDER_RETURN_IF_ERROR(pack->create(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR));
  STRIDER_RETURN_IF_ERROR(pack->set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids.data(), 4));
  STRIDER_RETURN_IF_ERROR(pack->set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, pointers.data(), 4));
  STRIDER_RETURN_IF_ERROR(pack->set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, &workspace));
  return pack->finalize();
}

Status GraphConv::prepare(const ConvSetup& c, size_t workspace_bytes) {
  auto address = [](const TensorView& v) -> void* { return v.allocation->address() + v.byte_offset; };
  pointers_ = {address(c.x), weights_->as<void>(), address(c.bias), address(c.y)};
  STRIDER_RETURN_IF_ERROR(workspace_.allocate(workspace_bytes));
  return make_pack(&pack_, pointers_[3]);
}

Status GraphConv::verify_stays_inside(const ConvSetup& c) {
  const size_t bytes = size_t(c.y.num_elements() * dtype_size(c.y.dtype));
  DeviceBuffer scratch;
  STRIDER_RETURN_IF_ERROR(scratch.allocate(bytes + 2 * kGuardBytes));
  STRIDER_CUDA_RETURN(cudaMemset(scratch.as<void>(), 0xA5, scratch.size()), "guard bytes");
  Descriptor pack;
  STRIDER_RETURN_IF_ERROR(make_pack(&pack, scratch.as<std::byte>() + kGuardBytes));
  STRIDER_RETURN_IF_ERROR(graph_status(cudnnSetStream(handle_, nullptr), "set stream"));
  STRIDER_RETURN_IF_ERROR(graph_status(cudnnBackendExecute(handle_, plan_.get(), pack.get()), "trial run"));
  STRIDER_CUDA_RETURN(cudaDeviceSynchronize(), "trial run");
  std::vector<unsigned char> before(kGuardBytes), after(kGuardBytes);
  STRIDER_CUDA_RETURN(cudaMemcpy(before.data(), scratch.as<void>(), kGuardBytes, cudaMemcpyDeviceToHost), "guard bytes");
  STRIDER_CUDA_RETURN(cudaMemcpy(after.data(), scratch.as<std::byte>() + kGuardBytes + bytes, kGuardBytes, cudaMemcpyDeviceToHost),
                      "guard bytes");
  for (size_t i = 0; i < kGuardBytes; ++i)
    if (before[i] != 0xA5 || after[i] != 0xA5)
      return unsupported(fmt::format("{} wrote outside its output view ({} bytes {} it)", name_,
                                     before[i] != 0xA5 ? kGuardBytes - i : i + 1, before[i] != 0xA5 ? "before" : "after"));
  return Status::ok();
}

bool packed_channels_last(const TensorView& v) { return v.rank() == 4 && is_packed(v) && v.strides[1] == 1; }

// Why an engine (or the whole graph) was not offered, on stderr with STRIDER_CUDNN_GRAPH=verbose:
// a diagnostic for the GPU sessions that check which shapes the engines take.
void refused(bool verbose, const ConvSetup& c, const std::string& what, const Status& why) {
  if (verbose)
    std::fprintf(stderr, "cudnn-graph: y%s%s: %s: %s\n", shape_to_string(c.y.sizes).c_str(),
                 shape_to_string(c.y.strides).c_str(), what.c_str(), why.to_string().c_str());
}

}  // namespace

std::vector<std::unique_ptr<Kernel>> cudnn_graph_conv_kernels(const ConvSetup& c, const KernelRequest& r,
                                                              const CudaContext& context) {
  std::vector<std::unique_ptr<Kernel>> offered;
  // On since session 18, its first runs on the H200 (YOLOv8n bf16 batch 32 1.84 -> 1.60 ms,
  // C2f 0.209 -> 0.159, every engine taken passing its guard-byte check);
  // STRIDER_CUDNN_GRAPH=off leaves it out (A/B runs), =verbose says why engines were refused.
  const char* env = std::getenv("STRIDER_CUDNN_GRAPH");
  const std::string_view mode = env ? env : "";
  const bool verbose = mode == "verbose";
  if (mode == "off") return offered;
  const std::optional<GraphActivation> act = graph_activation(c.epilogue);
  const Tensor* constant_weights = r.constant_input(1);
  if (!act || !constant_weights || !c.bias.allocation || c.group != 1 || c.x.rank() != 4 ||
      (c.y.dtype != DType::kBF16 && c.y.dtype != DType::kF16) || !packed_channels_last(c.x) ||
      !packed_channels_last(c.y) || !is_packed(c.bias)) {
    refused(verbose, c, "graph", unsupported("not a case the graph takes"));
    return offered;
  }
  auto weights = std::make_shared<DeviceBuffer>();
  if (Status s = upload_krsc_weights(c.w, *constant_weights, weights.get()); !s.is_ok()) {
    refused(verbose, c, "weights", s);
    return offered;
  }
  auto handle = static_cast<cudnnHandle_t>(context.cudnn);
  auto graph = std::make_shared<FusedConvGraph>();
  if (Status s = graph->build(c, weights->as<void>(), handle, *act); !s.is_ok()) {
    refused(verbose, c, "build", s);
    return offered;
  }
  Result<std::vector<Descriptor>> configs = graph->engine_configs();
  if (!configs.is_ok()) {
    refused(verbose, c, "heuristics", configs.status());
    return offered;
  }
  if (configs->empty()) refused(verbose, c, "heuristics", unsupported("no engine configuration"));
  for (size_t k = 0; k < configs->size(); ++k) {
    Descriptor& config = (*configs)[k];
    if (int(offered.size()) == kMaxEnginesOffered) break;
    const std::string name = fmt::format("cudnn-graph:engine{}.{}+bias+{}", engine_index(config), k, act->name);
    Descriptor plan;
    cudnnBackendDescriptor_t cfg = config.get();
    Status built = plan.create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    if (built.is_ok()) built = plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &handle);
    if (built.is_ok()) built = plan.set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, &cfg);
    if (built.is_ok()) built = plan.finalize();
    if (!built.is_ok()) {
      refused(verbose, c, name + " plan", built);
      continue;
    }
    int64_t workspace = 0, n = 0;
    if (cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n,
                                 &workspace) != CUDNN_STATUS_SUCCESS ||
        size_t(workspace) > kMaxGraphWorkspace) {
      refused(verbose, c, name, unsupported(fmt::format("workspace {} bytes", workspace)));
      continue;
    }
    auto kernel = std::make_unique<GraphConv>(graph, weights, std::move(plan), handle, name);
    Status checked = kernel->prepare(c, size_t(workspace));
    if (checked.is_ok()) checked = kernel->verify_stays_inside(c);
    if (!checked.is_ok()) {
      cudaGetLastError();  // a failed trial leaves no error behind for the next call
      refused(verbose, c, name, checked);
      continue;
    }
    offered.push_back(std::move(kernel));
  }
  return offered;
}

}  // namespace strider::cuda
