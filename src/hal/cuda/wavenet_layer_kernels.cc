// FusedWaveNetLayer on CUDA (ops/wavenet_layer.h): the layer's weights laid out once for
// the kernel of wavenet_layer.h, which runs the gate and both projections in one launch.
#include <fmt/format.h>

#include <vector>

#include "hal/cuda/cuda_kernels.h"
#include "hal/cuda/device_buffer.h"
#include "hal/cuda/wavenet_layer.h"
#include "ops/wavenet_layer.h"

namespace strider::cuda {
namespace {

using KernelPtr = std::unique_ptr<Kernel>;

WaveNetLayerView output_view(const KernelRequest& r, size_t o) {
  WaveNetLayerView v;
  if (o >= r.outputs.size() || !r.outputs[o].allocation) return v;
  const TensorView& t = r.outputs[o];
  v.data = t.allocation->address() + t.byte_offset;
  v.image = t.strides[0], v.channel = t.strides[1], v.step = t.strides[2];
  return v;
}

class WaveNetLayerKernel final : public Kernel {
 public:
  Status init(const KernelRequest& r, int sms, size_t shared_limit) {
    STRIDER_ASSIGN_OR_RETURN(WaveNetLayerGeometry geometry, wavenet_layer_geometry(r.graph, r.node));
    const TensorView& x = r.inputs.at(kWaveX);
    WaveNetLayerArgs& a = launch_.args;
    if (geometry.skip_channels != 0 && geometry.skip_channels != geometry.channels)
      return unsupported(fmt::format("{}: a skip of {} channels from {} (the kernel takes as many)", describe_node(r.node),
                                     geometry.skip_channels, geometry.channels));
    if (geometry.taps > kWaveNetLayerMaxTaps)
      return unsupported(fmt::format("{}: {} taps (the kernel takes 1 to {})", describe_node(r.node), geometry.taps,
                                     kWaveNetLayerMaxTaps));
    a.c = int32_t(geometry.channels), a.taps = int32_t(geometry.taps);
    a.steps = x.sizes[2], a.columns = x.sizes[0] * x.sizes[2];
    a.x = x.allocation->address() + x.byte_offset;
    a.x_image = x.strides[0], a.x_channel = x.strides[1], a.x_step = x.strides[2];
    a.y = output_view(r, kWaveY), a.s = output_view(r, kWaveS), a.g = output_view(r, kWaveG);
    a.residual_tile = -1;
    for (int i = 0; i < a.taps; ++i) {
      a.tap_offset[i] = int32_t(geometry.tap_offset(i));
      if (a.tap_offset[i] == 0) a.residual_tile = i;
    }
    a.tiles = a.taps;
    if (a.residual_tile < 0) a.residual_tile = a.tiles++, a.tap_offset[a.residual_tile] = 0;
    STRIDER_RETURN_IF_ERROR(upload_weights(r));
    return prepare_wavenet_layer(x.dtype, sms, shared_limit, &launch_);
  }
  Status run(const QueueContext& queue) override { return run_wavenet_layer(launch_, stream_of(queue)); }
  std::string implementation() const override {
    return fmt::format("strider-cuda:wavenet-layer ({} taps, {} columns a thread)", launch_.args.taps, launch_.args.q);
  }

 private:
  // Wg [2C, C, K] as Wg^T [K][C][2C], Bg, Wr [C, C, 1] as Wr^T [C][C], Br, Ws as Ws^T, Bs,
  // f32, zeros for what the layer lacks.
  Status upload_weights(const KernelRequest& r) {
    const int64_t c = launch_.args.c, taps = launch_.args.taps;
    std::vector<float> all(size_t(wavenet_layer_weight_floats(c, taps)), 0.0f);
    auto constant = [&](size_t input, int64_t count) -> Result<const Tensor*> {
      if (!r.has_input(input)) return static_cast<const Tensor*>(nullptr);
      const Tensor* t = r.constant_input(input);
      if (t == nullptr || t->num_elements() != count)
        return unsupported(fmt::format("{}: input {} is not a constant of {} elements", describe_node(r.node), input, count));
      return t;
    };
    STRIDER_ASSIGN_OR_RETURN(const Tensor* wg, constant(kWaveGateW, 2 * c * c * taps));
    STRIDER_ASSIGN_OR_RETURN(const Tensor* bg, constant(kWaveGateB, 2 * c));
    STRIDER_ASSIGN_OR_RETURN(const Tensor* wr, constant(kWaveResW, c * c));
    STRIDER_ASSIGN_OR_RETURN(const Tensor* br, constant(kWaveResB, c));
    STRIDER_ASSIGN_OR_RETURN(const Tensor* ws, constant(kWaveSkipW, c * c));
    STRIDER_ASSIGN_OR_RETURN(const Tensor* bs, constant(kWaveSkipB, c));
    if (wg == nullptr) return unsupported(fmt::format("{}: no gate weights", describe_node(r.node)));
    for (int64_t i = 0; i < taps; ++i)
      for (int64_t j = 0; j < c; ++j)
        for (int64_t o = 0; o < 2 * c; ++o)
          all[size_t((i * c + j) * 2 * c + o)] = float(wg->element_as_double((o * c + j) * taps + i));
    auto put = [&](const Tensor* t, int64_t at, int64_t rows, bool transpose) {
      if (t == nullptr) return;
      for (int64_t e = 0; e < t->num_elements(); ++e) {
        const int64_t row = e / rows, column = e % rows;  // t's [row][column] (W [out][in]: row = out)
        all[size_t(at + (transpose ? column * rows + row : e))] = float(t->element_as_double(e));
      }
    };
    put(bg, wavenet_gate_bias_at(c, taps), 2 * c, false);
    put(wr, wavenet_residual_at(c, taps), c, true);
    put(br, wavenet_residual_at(c, taps) + c * c, c, false);
    put(ws, wavenet_skip_at(c, taps), c, true);
    put(bs, wavenet_skip_at(c, taps) + c * c, c, false);
    STRIDER_RETURN_IF_ERROR(weights_.upload(std::as_bytes(std::span(all))));
    launch_.args.weights = weights_.as<float>();
    return Status::ok();
  }

  WaveNetLayerLaunch launch_;
  DeviceBuffer weights_;
};

Result<KernelPtr> make_wavenet_layer(const KernelRequest& r, const CudaContext& context) {
  STRIDER_ASSIGN_OR_RETURN(DeviceLimits limits, device_limits(context, r.node));
  auto kernel = std::make_unique<WaveNetLayerKernel>();
  STRIDER_RETURN_IF_ERROR(kernel->init(r, limits.multiprocessors, limits.shared_per_block));
  return KernelPtr(std::move(kernel));
}

}  // namespace

void register_wavenet_layer_kernels(std::vector<KernelEntry>& table) {
  table.push_back({kFusedWaveNetLayerOp, make_wavenet_layer});
}

}  // namespace strider::cuda
