// FusedGatedStack on CUDA (ops/gated_stack.h): the units' weights laid out once for the
// kernel of gated_stack.h, which runs the whole stack in one launch.
#include <fmt/format.h>

#include <vector>

#include "hal/cuda/cuda_kernels.h"
#include "hal/cuda/device_buffer.h"
#include "hal/cuda/gated_stack.h"
#include "ops/gated_stack.h"

namespace strider::cuda {
namespace {

using KernelPtr = std::unique_ptr<Kernel>;

class GatedStackKernel final : public Kernel {
 public:
  Status init(const KernelRequest& r, int sms, size_t shared_limit) {
    const TensorView &x = r.inputs.at(0), &y = r.outputs.at(0);
    GatedStackArgs& a = launch_.args;
    a.units = int32_t(gated_stack_units(r.node));
    a.c = int32_t(x.sizes.at(1));
    a.spatial_rank = int32_t(x.rank() - 2);
    if (a.spatial_rank < 1 || a.spatial_rank > 3)
      return unsupported(fmt::format("{}: {} spatial axes (the kernel takes 1 to 3)", describe_node(r.node), a.spatial_rank));
    a.columns = x.sizes[0];
    for (int d = 0; d < a.spatial_rank; ++d) {
      a.spatial[d] = x.sizes[size_t(2 + d)], a.columns *= a.spatial[d];
      a.x_spatial[d] = x.strides[size_t(2 + d)], a.y_spatial[d] = y.strides[size_t(2 + d)];
    }
    a.x_image = x.strides[0], a.y_image = y.strides[0], a.x_channel = x.strides[1], a.y_channel = y.strides[1];
    STRIDER_RETURN_IF_ERROR(upload_weights(r));
    a.x = x.allocation->address() + x.byte_offset;
    a.y = y.allocation->address() + y.byte_offset;
    return prepare_gated_stack(x.dtype, sms, shared_limit, &launch_);
  }
  Status run(const QueueContext& queue) override { return run_gated_stack(launch_, stream_of(queue)); }
  std::string implementation() const override {
    return fmt::format("strider-cuda:gated-stack ({} units, {} columns a thread, {} weight buffers)", launch_.args.units,
                       launch_.args.q, launch_.args.weight_buffers);
  }

 private:
  // Per unit W [2C, C, 1...] as W^T [C][2C] (row j: every output row's weight of input
  // channel j), then B [2C] (zeros where absent), f32.
  Status upload_weights(const KernelRequest& r) {
    const int64_t c = launch_.args.c;
    std::vector<float> all;
    all.reserve(size_t(launch_.args.units * gated_stack_unit_floats(c)));
    for (int64_t u = 0; u < launch_.args.units; ++u) {
      const Tensor* w = r.constant_input(size_t(1 + 2 * u));
      const Tensor* b = r.constant_input(size_t(2 + 2 * u));
      if (w == nullptr || w->num_elements() != 2 * c * c || (r.has_input(size_t(2 + 2 * u)) && b == nullptr))
        return unsupported(fmt::format("{}: unit {}'s weights or bias are not constants", describe_node(r.node), u));
      for (int64_t j = 0; j < c; ++j)
        for (int64_t o = 0; o < 2 * c; ++o) all.push_back(float(w->element_as_double(o * c + j)));
      for (int64_t o = 0; o < 2 * c; ++o) all.push_back(b ? float(b->element_as_double(o)) : 0.0f);
    }
    STRIDER_RETURN_IF_ERROR(weights_.upload(std::as_bytes(std::span(all))));
    launch_.args.weights = weights_.as<float>();
    return Status::ok();
  }

  GatedStackLaunch launch_;
  DeviceBuffer weights_;
};

Result<KernelPtr> make_gated_stack(const KernelRequest& r, const CudaContext& context) {
  STRIDER_ASSIGN_OR_RETURN(DeviceLimits limits, device_limits(context, r.node));
  auto kernel = std::make_unique<GatedStackKernel>();
  STRIDER_RETURN_IF_ERROR(kernel->init(r, limits.multiprocessors, limits.shared_per_block));
  return KernelPtr(std::move(kernel));
}

}  // namespace

void register_gated_stack_kernels(std::vector<KernelEntry>& table) { table.push_back({kFusedGatedStackOp, make_gated_stack}); }

}  // namespace strider::cuda
