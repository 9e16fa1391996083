// Resize (opsets 10-19) and Upsample (7, 9) on the GPU, with the CPU kernel's semantics:
// every mode and coordinate transformation, antialias, exclude_outside and
// tf_crop_and_resize extrapolation. The per-axis taps come from src/ops/resize_taps.h
// (the CPU kernel's own) and are uploaded once when the kernel is created; run() is one
// gather launch (resize.cu). Dims are visited in the output's memory order, so the nearest
// 2x upsample of a detector neck is a coalesced gather in NCHW and NHWC alike.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "base/float16.h"
#include "hal/cuda/cuda_kernels.h"
#include "hal/cuda/device_buffer.h"
#include "hal/cuda/launch.h"
#include "hal/resize_views.h"
#include "ops/resize_taps.h"

namespace strider::cuda {

using KernelPtr = std::unique_ptr<Kernel>;
namespace {

class ResizeKernel final : public Kernel {
 public:
  ResizeKernel(std::string name, DeviceBuffer tables) : name_(std::move(name)), tables_(std::move(tables)) {}
  ResizeLaunch& launch() { return launch_; }
  const DeviceBuffer& tables() const { return tables_; }
  Status run(const QueueContext& context) override { return run_resize(launch_, stream_of(context)); }
  std::string implementation() const override { return "strider-cuda:" + name_; }

 private:
  std::string name_;
  DeviceBuffer tables_;  // offsets, weights, outside flags
  ResizeLaunch launch_;
};

// The per-dim tap tables concatenated, as resize.cu reads them.
struct Tables {
  std::vector<ResizeAxis> axes;
  std::vector<int64_t> offsets;
  std::vector<double> weights;
  std::vector<uint8_t> outside;
  bool all_single = true;
  bool any_outside = false;
};

// Loop order: size-1 dims first, then by decreasing output stride, so the output's
// innermost memory dim is last (what the CPU kernel's make_plan does).
std::vector<size_t> loop_order(const TensorView& y) {
  std::vector<size_t> order(size_t(y.rank()));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if ((y.sizes[a] == 1) != (y.sizes[b] == 1)) return y.sizes[a] == 1;
    return std::abs(y.strides[a]) > std::abs(y.strides[b]);
  });
  return order;
}

Result<Tables> make_tables(const ResizeParams& p, const TensorView& x, const TensorView& y, bool legacy) {
  Tables t;
  for (size_t d : loop_order(y)) {
    STRIDER_ASSIGN_OR_RETURN(ResizeTaps taps,
                             resize_axis_taps(p, resize_axis_geometry(p, x.sizes[d], y.sizes[d], d, legacy), x.strides[d]));
    ResizeAxis axis;
    axis.size = y.sizes[d];
    axis.out_stride = y.strides[d];
    axis.in_stride = x.strides[d];
    axis.width = taps.width;
    axis.identity = taps.identity;
    axis.table = int64_t(t.offsets.size());
    axis.flags = int64_t(t.outside.size());
    if (!taps.identity) {
      t.offsets.insert(t.offsets.end(), taps.offsets.begin(), taps.offsets.end());
      t.weights.insert(t.weights.end(), taps.weights.begin(), taps.weights.end());
    }
    t.outside.insert(t.outside.end(), taps.outside.begin(), taps.outside.end());
    t.all_single = t.all_single && taps.width == 1;
    for (uint8_t o : taps.outside) t.any_outside = t.any_outside || o != 0;
    t.axes.push_back(axis);
  }
  return t;
}

// Appends `values` to `bytes` at an offset aligned for T; returns the offset.
template <typename T>
size_t append(std::vector<std::byte>& bytes, const std::vector<T>& values) {
  size_t offset = (bytes.size() + 15) / 16 * 16;
  bytes.resize(offset + values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(bytes.data() + offset, values.data(), values.size() * sizeof(T));
  return offset;
}

// The extrapolation value stored as `dtype`, as the CPU kernel's store<T> converts it.
uint64_t fill_bits(double v, DType dtype) {
  uint64_t bits = 0;
  auto put = [&bits](auto value) { std::memcpy(&bits, &value, sizeof(value)); };
  switch (dtype) {
    case DType::kF32: put(float(v)); break;
    case DType::kF16: put(f16::from_float(float(v)).bits); break;
    case DType::kBF16: put(bf16::from_float(float(v)).bits); break;
    case DType::kF64: put(v); break;
    case DType::kI64: put(int64_t(v)); break;
    case DType::kI32: put(int32_t(v)); break;
    case DType::kI8: put(int8_t(v)); break;
    case DType::kU8: put(uint8_t(v)); break;
    case DType::kBool: put(uint8_t(v != 0)); break;
    default: break;  // no CUDA kernel takes the other integers (cuda_kernels.cc)
  }
  return bits;
}

Result<KernelPtr> make_resize(const KernelRequest& r, const CudaContext&) {
  STRIDER_ASSIGN_OR_RETURN(ResizeParams p, resolve_resize(NodeInputs(r.graph, r.node)));
  STRIDER_RETURN_IF_ERROR(check_resize_views(r, p));
  const TensorView& x = r.inputs[0];
  const TensorView& y = r.outputs[0];
  const char* mode = p.mode == ResizeMode::kNearest ? "nearest" : p.mode == ResizeMode::kLinear ? "linear" : "cubic";
  // Only nearest is a pure gather; interpolating integers is not supported.
  if (!is_floating(x.dtype) && p.mode != ResizeMode::kNearest)
    return unsupported(fmt::format("{} mode '{}' on {}", r.node.op_type, mode, dtype_name(x.dtype)));
  STRIDER_ASSIGN_OR_RETURN(Tables t, make_tables(p, x, y, resize_legacy_nearest(p, r.node)));
  std::vector<std::byte> bytes;
  size_t offsets_at = append(bytes, t.offsets);
  size_t weights_at = x.dtype == DType::kF64 ? append(bytes, t.weights)
                                             : append(bytes, std::vector<float>(t.weights.begin(), t.weights.end()));
  size_t outside_at = append(bytes, t.outside);
  DeviceBuffer tables;
  STRIDER_RETURN_IF_ERROR(tables.upload(bytes));
  auto kernel = std::make_unique<ResizeKernel>(fmt::format("resize_{}", mode), std::move(tables));
  const std::byte* base = kernel->tables().as<const std::byte>();
  ResizeSpec spec;
  spec.x = x;
  spec.y = y;
  spec.axes = t.axes;
  spec.offsets = reinterpret_cast<const int64_t*>(base + offsets_at);
  spec.weights = t.all_single ? nullptr : base + weights_at;
  spec.outside = t.any_outside ? reinterpret_cast<const uint8_t*>(base + outside_at) : nullptr;
  spec.extrapolation = p.extrapolation_value;
  STRIDER_RETURN_IF_ERROR(prepare_resize(spec, fill_bits(p.extrapolation_value, y.dtype), &kernel->launch()));
  return KernelPtr(std::move(kernel));
}

}  // namespace

void register_resize_kernels(std::vector<KernelEntry>& table) {
  table.push_back({"Resize", make_resize});
  table.push_back({"Upsample", make_resize});
}

}  // namespace strider::cuda
