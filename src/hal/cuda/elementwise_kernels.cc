// Elementwise kernels on the GPU: every row of the table in ops/elementwise_math.h, and
// Where, Clip, Pow, the variadic Sum/Mean/Min/Max, Cast and CastLike, and
// BatchNormalization (inference). Same ops, dtypes, functors and parameters as the CPU's
// elementwise kernels; the launches themselves live in elementwise.cu.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "hal/cuda/copy.h"
#include "hal/cuda/cuda_kernels.h"
#include "hal/cuda/launch.h"
#include "hal/cuda/device_buffer.h"
#include "hal/cuda/epilogue.h"
#include "ops/elementwise_params.h"
#include "ops/shape_ops.h"
#include "hal/map_group_kernel.h"
#include "ops/fused_elementwise.h"
#include "ops/fused_map_group.h"

namespace strider::cuda {

static_assert(kMapGroupMembers == kMaxMapGroupMembers, "the group kernel holds every member a group may have");

using KernelPtr = std::unique_ptr<Kernel>;
namespace {

// One or more prepared map launches run in order on the queue's stream.
class MapKernel final : public Kernel {
 public:
  MapKernel(std::string name, std::vector<MapLaunch> launches) : name_(std::move(name)), launches_(std::move(launches)) {}
  Status run(const QueueContext& context) override {
    for (const MapLaunch& l : launches_) STRIDER_RETURN_IF_ERROR(run_map(l, stream_of(context)));
    return Status::ok();
  }
  // The op and how its first launch addresses elements (rows, vector, linear, strided).
  std::string implementation() const override {
    return "strider-cuda:" + name_ + (launches_.empty() ? "" : std::string(" ") + map_mode_name(launches_[0]));
  }

 private:
  std::string name_;
  std::vector<MapLaunch> launches_;
};

// Cast between equal dtypes: a strided copy.
class CopyCastKernel final : public Kernel {
 public:
  CopyCastKernel(TensorView out, TensorView in) : out_(std::move(out)), in_(std::move(in)) {}
  Status run(const QueueContext& context) override { return launch_copy(out_, in_, stream_of(context)); }
  std::string implementation() const override { return "strider-cuda:copy:Cast"; }

 private:
  TensorView out_, in_;
};

Status unsupported_dtype(const KernelRequest& r, DType dtype) {
  return unsupported(fmt::format("{} on {} is not supported", r.node.op_type, dtype_name(dtype)));
}

Status check_dtype(const KernelRequest& r, const TensorView& view, DType expected, std::string_view what) {
  if (view.dtype == expected) return Status::ok();
  return invalid_argument(fmt::format("{} {} is {}, expected {}", r.node.op_type, what, dtype_name(view.dtype),
                                      dtype_name(expected)));
}

// Broadcasts `inputs` to the output's sizes and prepares the launch. An UNSUPPORTED
// answer from the launcher (no instantiation for these dtypes) names the op and dtype.
Result<MapLaunch> prepare(const KernelRequest& r, MapOp op, const TensorView& out, const std::vector<TensorView>& inputs,
                          const MapParams& params) {
  MapSpec spec{op, out, {}, params};
  for (const TensorView& in : inputs) {
    STRIDER_ASSIGN_OR_RETURN(TensorView b, broadcast_view(in, out.sizes));
    spec.inputs.push_back(std::move(b));
  }
  MapLaunch launch;
  Status s = prepare_map(spec, &launch);
  if (s.code() == StatusCode::kUnsupported)
    return unsupported(fmt::format("{} on {} is not supported: {}", r.node.op_type, dtype_name(inputs[0].dtype), s.message()));
  if (!s.is_ok()) return s;
  return launch;
}

Result<KernelPtr> make_map(const KernelRequest& r, MapOp op, std::vector<TensorView> inputs, MapParams params = {}) {
  STRIDER_ASSIGN_OR_RETURN(MapLaunch launch, prepare(r, op, r.outputs[0], inputs, params));
  return KernelPtr(new MapKernel(r.node.op_type, {launch}));
}

// A row of the table in ops/elementwise_math.h: its parameters resolved from the node,
// its operands checked against its kind.
template <ElementwiseOp kOp>
Result<KernelPtr> table_kernel(const KernelRequest& r, const CudaContext&) {
  constexpr ElementwiseKind kKind = ElementwiseTraits<kOp>::kKind;
  constexpr size_t kArity = size_t(elementwise_arity(kKind));
  constexpr bool kLogic = kKind == ElementwiseKind::kLogicUnary || kKind == ElementwiseKind::kLogicBinary;
  constexpr bool kToBool = kKind == ElementwiseKind::kCompare || kKind == ElementwiseKind::kFloatTest;
  if (kLogic && r.inputs[0].dtype != DType::kBool) return unsupported_dtype(r, r.inputs[0].dtype);
  STRIDER_ASSIGN_OR_RETURN(ElementwiseParams params, resolve_elementwise_params(kOp, r.node.attributes));
  MapParams p;
  p.elementwise = kOp;
  p.scalars[0] = params.alpha;
  p.scalars[1] = params.beta;
  STRIDER_RETURN_IF_ERROR(check_dtype(r, r.outputs[0], kToBool ? DType::kBool : r.inputs[0].dtype, "output"));
  for (size_t i = 1; i < kArity; ++i) STRIDER_RETURN_IF_ERROR(check_dtype(r, r.inputs[i], r.inputs[0].dtype, "input"));
  return make_map(r, MapOp::kElementwise, std::vector<TensorView>(r.inputs.begin(), r.inputs.begin() + long(kArity)), p);
}

Result<KernelPtr> make_where(const KernelRequest& r, const CudaContext&) {
  if (r.inputs[0].dtype != DType::kBool) return unsupported_dtype(r, r.inputs[0].dtype);
  STRIDER_RETURN_IF_ERROR(check_dtype(r, r.inputs[2], r.inputs[1].dtype, "input 2"));
  STRIDER_RETURN_IF_ERROR(check_dtype(r, r.outputs[0], r.inputs[1].dtype, "output"));
  return make_map(r, MapOp::kWhere, {r.inputs[0], r.inputs[1], r.inputs[2]});
}

// Clip's bounds: optional scalar inputs (opset >= 11), read on the device at each run so
// computed bounds work too, or attributes (< 11).
Result<KernelPtr> make_clip(const KernelRequest& r, const CudaContext&) {
  const AttributeMap& a = r.node.attributes;
  DType dtype = r.inputs[0].dtype;
  if (dtype == DType::kBool) return unsupported_dtype(r, dtype);
  MapParams p;
  STRIDER_ASSIGN_OR_RETURN(p.scalars[0], a.get_float("min", -std::numeric_limits<float>::infinity()));
  STRIDER_ASSIGN_OR_RETURN(p.scalars[1], a.get_float("max", std::numeric_limits<float>::infinity()));
  for (size_t i = 1; i < 3; ++i) {
    if (!r.has_input(i)) continue;
    if (r.inputs[i].num_elements() != 1)
      return invalid_argument(fmt::format("Clip bound {} has {} elements", i, r.inputs[i].num_elements()));
    STRIDER_RETURN_IF_ERROR(check_dtype(r, r.inputs[i], dtype, i == 1 ? "min" : "max"));
    p.bounds[i - 1] = device_data<const std::byte>(r.inputs[i]);
  }
  STRIDER_RETURN_IF_ERROR(check_dtype(r, r.outputs[0], dtype, "output"));
  return make_map(r, MapOp::kClip, {r.inputs[0]}, p);
}

Result<KernelPtr> make_pow(const KernelRequest& r, const CudaContext&) {
  DType base = r.inputs[0].dtype, exponent = r.inputs[1].dtype;
  if (base == DType::kBool || base == DType::kI8 || base == DType::kU8) return unsupported_dtype(r, base);
  if (exponent == DType::kBool) return unsupported_dtype(r, exponent);
  STRIDER_RETURN_IF_ERROR(check_dtype(r, r.outputs[0], base, "output"));
  MapParams p;
  p.dynamic = exponent;
  return make_map(r, MapOp::kPow, {r.inputs[0], r.inputs[1]}, p);
}

Result<KernelPtr> make_cast(const KernelRequest& r, const CudaContext&) {
  const TensorView& in = r.inputs[0];
  const TensorView& out = r.outputs[0];
  if (in.dtype == out.dtype) return KernelPtr(new CopyCastKernel(out, in));
  MapParams p;
  p.dynamic = in.dtype;
  return make_map(r, MapOp::kCast, {in}, p);
}

// FusedElementwise: the program travels in the launch's parameters (FusedCode).
Result<KernelPtr> make_fused(const KernelRequest& r, const CudaContext&) {
  STRIDER_ASSIGN_OR_RETURN(FusedProgram program, read_fused_program(r.node));
  if (r.inputs.size() != size_t(program.inputs)) return internal_error("fused program and inputs disagree");
  STRIDER_ASSIGN_OR_RETURN(MapLaunch launch, prepare(r, MapOp::kFused, r.outputs[0], r.inputs, fused_map_params(program)));
  return KernelPtr(new MapKernel("fused " + describe_fused_program(program), {launch}));
}

// FusedMapGroup: its members in one launch (map_group.cu), or, where they do not fit that
// kernel, each member's own map in turn. The planner never lets one member's output share
// bytes with another's operands (the group has no in-place trait); were it to, the
// members' elements would race in one launch, so such a group runs member by member.
class MapGroupKernel final : public Kernel {
 public:
  MapGroupKernel(MapGroupLaunch launch, std::string text) : launch_(launch), text_(std::move(text)) {}
  Status run(const QueueContext& context) override { return run_map_group(launch_, stream_of(context)); }
  std::string implementation() const override { return "strider-cuda:map group " + text_; }

 private:
  MapGroupLaunch launch_;
  std::string text_;
};

bool members_share_bytes(const std::vector<KernelRequest>& members) {
  for (size_t m = 0; m < members.size(); ++m)
    for (size_t k = 0; k < members.size(); ++k) {
      if (k == m) continue;
      if (may_overlap(members[m].outputs[0], members[k].outputs[0])) return true;
      for (const TensorView& in : members[k].inputs)
        if (may_overlap(members[m].outputs[0], in)) return true;
    }
  return false;
}

Result<KernelPtr> make_map_group(const KernelRequest& r, const CudaContext& context) {
  STRIDER_ASSIGN_OR_RETURN(std::vector<Node> members, map_group_members(r.node));
  const std::vector<KernelRequest> requests = map_group_member_requests(r, members);
  auto one_by_one = [&] { return make_sequential_map_group(r, [&](const KernelRequest& q) { return make_fused(q, context); }); };
  if (members_share_bytes(requests)) return one_by_one();
  std::vector<MapSpec> specs;
  std::string text = "of " + std::to_string(members.size()) + ":";
  for (const KernelRequest& q : requests) {
    STRIDER_ASSIGN_OR_RETURN(FusedProgram program, read_fused_program(q.node));
    MapSpec spec{MapOp::kFused, q.outputs[0], {}, fused_map_params(program)};
    for (const TensorView& in : q.inputs) {
      STRIDER_ASSIGN_OR_RETURN(TensorView b, broadcast_view(in, q.outputs[0].sizes));
      spec.inputs.push_back(std::move(b));
    }
    text += (specs.empty() ? " " : "; ") + describe_fused_program(program);
    specs.push_back(std::move(spec));
  }
  MapGroupLaunch launch;
  Status prepared = prepare_map_group(specs, &launch);
  if (prepared.code() == StatusCode::kUnsupported) return one_by_one();
  STRIDER_RETURN_IF_ERROR(prepared);
  return KernelPtr(new MapGroupKernel(launch, std::move(text)));
}

// BatchNormalization (inference): the four parameter vectors are broadcast along dim 1
// of x and combined per element, so computed parameters need no extra pass.
Result<KernelPtr> make_batch_norm(const KernelRequest& r, const CudaContext&) {
  STRIDER_ASSIGN_OR_RETURN(float epsilon, r.node.attributes.get_float("epsilon", 1e-5f));
  const TensorView& x = r.inputs[0];
  if (r.inputs.size() < 5 || x.rank() < 2) return invalid_argument("BatchNormalization needs x of rank >= 2 and 4 parameters");
  if (!is_floating(x.dtype)) return unsupported_dtype(r, x.dtype);
  std::vector<TensorView> inputs{x};
  for (size_t i = 1; i < 5; ++i) {
    const TensorView& v = r.inputs[i];
    if (v.dtype != x.dtype)
      return unsupported(fmt::format("BatchNormalization with {} input {} and {} data", dtype_name(v.dtype), i,
                                     dtype_name(x.dtype)));
    if (v.rank() != 1 || v.sizes[0] != x.sizes[1])
      return invalid_argument(fmt::format("BatchNormalization input {} is {}, expected [{}]", i,
                                          shape_to_string(v.sizes), x.sizes[1]));
    Strides strides(size_t(x.rank()), 0);
    strides[1] = v.strides[0];
    STRIDER_ASSIGN_OR_RETURN(TensorView along_channels, reinterpret(v, x.sizes, strides, 0, "parameter"));
    inputs.push_back(std::move(along_channels));
  }
  STRIDER_RETURN_IF_ERROR(check_dtype(r, r.outputs[0], x.dtype, "output"));
  MapParams p;
  p.scalars[0] = epsilon;
  return make_map(r, MapOp::kBatchNorm, std::move(inputs), p);
}

// Sum, Mean, Min, Max: up to 8 inputs per launch; more are folded into the output by
// further launches that read it as their first input. Inputs that may share bytes with
// the output (written in place over a dying input) go first, so that every one of them
// is read before the output is written.
Result<KernelPtr> make_variadic(const KernelRequest& r, MapOp op) {
  const TensorView& out = r.outputs[0];
  if (out.dtype == DType::kBool) return unsupported_dtype(r, out.dtype);
  std::vector<TensorView> inputs = r.inputs;
  for (const TensorView& in : inputs) STRIDER_RETURN_IF_ERROR(check_dtype(r, in, out.dtype, "input"));
  auto aliased = std::stable_partition(inputs.begin(), inputs.end(), [&](const TensorView& v) { return may_overlap(v, out); });
  constexpr size_t kChunk = size_t(kMaxMapOperands - 1);
  if (size_t(aliased - inputs.begin()) > kChunk)
    return unsupported(fmt::format("{} with more than {} inputs sharing bytes with the output", r.node.op_type, kChunk));
  std::vector<MapLaunch> launches;
  for (size_t first = 0; first < inputs.size();) {
    std::vector<TensorView> chunk;
    if (first > 0) chunk.push_back(out);
    while (chunk.size() < kChunk && first < inputs.size()) chunk.push_back(inputs[first++]);
    MapParams p;
    if (op == MapOp::kMean && first == inputs.size()) p.scale = 1.0 / double(inputs.size());
    STRIDER_ASSIGN_OR_RETURN(MapLaunch launch, prepare(r, op, out, chunk, p));
    launches.push_back(launch);
  }
  return KernelPtr(new MapKernel(r.node.op_type, std::move(launches)));
}

template <MapOp kOp>
Result<KernelPtr> variadic(const KernelRequest& r, const CudaContext&) {
  return make_variadic(r, kOp);
}

// Trilu: Where(mask, x, 0), the mask of the kept triangle (ops/shape_ops.h) uploaded once
// and broadcast over the batch dims, with a zero of x's type broadcast everywhere.
class TriluKernel final : public Kernel {
 public:
  Status init(const KernelRequest& r, const Tensor& mask) {
    std::vector<std::byte> bytes(mask.byte_size() + 16, std::byte{0});  // mask, then an 8-byte-aligned zero
    std::memcpy(bytes.data(), mask.bytes(), mask.byte_size());
    STRIDER_RETURN_IF_ERROR(memory_.upload(bytes));
    const int64_t zero_at = (int64_t(mask.byte_size()) + 7) / 8 * 8;
    allocation_ = std::make_unique<Allocation>(0, "trilu-mask", "cuda", memory_.as<std::byte>(), int64_t(bytes.size()), 8,
                                               StorageMode::kDevice, false);
    const TensorView& x = r.inputs[0];
    STRIDER_ASSIGN_OR_RETURN(TensorView mask_view,
                             make_view(*allocation_, 0, DType::kBool, x.sizes, trilu_mask_strides(x.sizes), "mask"));
    STRIDER_ASSIGN_OR_RETURN(TensorView zero,
                             make_view(*allocation_, zero_at, x.dtype, x.sizes, Strides(x.sizes.size(), 0), "zero"));
    STRIDER_ASSIGN_OR_RETURN(launch_, prepare(r, MapOp::kWhere, r.outputs[0], {mask_view, x, zero}, {}));
    return Status::ok();
  }
  Status run(const QueueContext& context) override { return run_map(launch_, stream_of(context)); }
  std::string implementation() const override { return "strider-cuda:Trilu"; }

 private:
  DeviceBuffer memory_;
  std::unique_ptr<Allocation> allocation_;
  MapLaunch launch_;
};

Result<KernelPtr> make_trilu(const KernelRequest& r, const CudaContext&) {
  STRIDER_ASSIGN_OR_RETURN(TriluParams p, resolve_trilu(NodeInputs(r.graph, r.node)));
  const Shape& sizes = r.inputs[0].sizes;
  auto kernel = std::make_unique<TriluKernel>();
  STRIDER_RETURN_IF_ERROR(kernel->init(r, trilu_mask(p, sizes[sizes.size() - 2], sizes.back())));
  return KernelPtr(std::move(kernel));
}

}  // namespace

void register_elementwise_kernels(std::vector<KernelEntry>& table) {
#define STRIDER_TABLE_KERNEL(name, kind, kernel, params) \
  if (ElementwiseKernel::kernel == ElementwiseKernel::kMap) table.push_back({#name, table_kernel<ElementwiseOp::k##name>});
  STRIDER_ELEMENTWISE_OPS(STRIDER_TABLE_KERNEL)
#undef STRIDER_TABLE_KERNEL
  table.push_back({"Where", make_where});
  table.push_back({"Trilu", make_trilu});
  table.push_back({"Clip", make_clip});
  table.push_back({"Pow", make_pow});
  table.push_back({"Cast", make_cast});
  table.push_back({"CastLike", make_cast});
  table.push_back({"BatchNormalization", make_batch_norm});
  table.push_back({"Sum", variadic<MapOp::kSum>});
  table.push_back({"Mean", variadic<MapOp::kMean>});
  table.push_back({"Min", variadic<MapOp::kMin>});
  table.push_back({"Max", variadic<MapOp::kMax>});
  table.push_back({kFusedElementwiseOp, make_fused});
  table.push_back({kFusedMapGroupOp, make_map_group});
}

}  // namespace strider::cuda
