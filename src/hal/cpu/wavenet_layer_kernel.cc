// FusedWaveNetLayer on the CPU (ops/wavenet_layer.h): each time step's gate and its
// projections in f32. The CPU forms the node for no model (Device::fuses_wavenet_layer
// stays false: its convolutions are oneDNN's); the kernel exists so that the kernel suite
// checks the op on cpu and sim, and as the plain statement of what the CUDA kernel computes.
#include <fmt/format.h>

#include "hal/cpu/cpu_kernels.h"
#include "hal/cpu/dtype_dispatch.h"
#include "hal/cpu/parallel.h"
#include "ops/gated_stack_math.h"
#include "ops/wavenet_layer.h"

namespace strider::cpu {
namespace {

using KernelPtr = std::unique_ptr<Kernel>;

// The layer's constants as f32: Wg [2C][C][K], Bg [2C], Wr [C][C], Br [C], Ws [S][C], Bs [S]
// (absent biases as zeros; absent projections empty).
struct LayerWeights {
  std::vector<float> wg, bg, wr, br, ws, bs;
};

Result<std::vector<float>> constant_floats(const KernelRequest& r, size_t input, int64_t count, bool required) {
  std::vector<float> out;
  if (!r.has_input(input)) {
    if (required) return unsupported(fmt::format("{}: input {} is missing", describe_node(r.node), input));
    return std::vector<float>(size_t(count), 0.0f);
  }
  const Tensor* t = r.constant_input(input);
  if (t == nullptr || t->num_elements() != count)
    return unsupported(fmt::format("{}: input {} is not a constant of {} elements", describe_node(r.node), input, count));
  out.reserve(size_t(count));
  for (int64_t i = 0; i < count; ++i) out.push_back(float(t->element_as_double(i)));
  return out;
}

template <typename T>
class WaveNetLayerKernel final : public Kernel {
 public:
  WaveNetLayerKernel(const KernelRequest& r, WaveNetLayerGeometry g, LayerWeights w)
      : x_(r.inputs.at(kWaveX)), geometry_(g), w_(std::move(w)) {
    for (size_t o = 0; o < 3; ++o)
      if (o < r.outputs.size() && r.outputs[o].allocation) outputs_[o] = r.outputs[o];
  }

  Status run(const QueueContext&) override {
    const int64_t n = x_.sizes[0], c = geometry_.channels, s = geometry_.skip_channels, steps = x_.sizes[2];
    parallel_for(n * steps, 4 * c * c * geometry_.taps + 2 * c * (c + s), [&](int64_t begin, int64_t end, int) {
      std::vector<float> z(static_cast<size_t>(2 * c)), g(static_cast<size_t>(c));
      for (int64_t column = begin; column < end; ++column) step(column / steps, column % steps, z.data(), g.data());
    });
    return Status::ok();
  }
  std::string implementation() const override {
    return fmt::format("strider:wavenet-layer ({} taps, dilation {})", geometry_.taps, geometry_.dilation);
  }

 private:
  float x_at(int64_t n, int64_t k, int64_t t) const {
    return float(load(x_.host_data_as<T>()[n * x_.strides[0] + k * x_.strides[1] + t * x_.strides[2]]));
  }
  void put(size_t output, int64_t n, int64_t k, int64_t t, float v) const {
    const TensorView& y = outputs_[output];
    y.host_data_as<T>()[n * y.strides[0] + k * y.strides[1] + t * y.strides[2]] = store<T>(v);
  }

  // Time step t of image n: z = Wg x + Bg over the taps, g = the gate, then the outputs.
  void step(int64_t n, int64_t t, float* z, float* g) const {
    const int64_t c = geometry_.channels, taps = geometry_.taps, steps = x_.sizes[2];
    for (int64_t o = 0; o < 2 * c; ++o) {
      float sum = 0;
      for (int64_t j = 0; j < c; ++j)
        for (int64_t i = 0; i < taps; ++i) {
          const int64_t at = t + geometry_.tap_offset(i);
          if (at >= 0 && at < steps) sum += w_.wg[size_t((o * c + j) * taps + i)] * x_at(n, j, at);
        }
      z[o] = sum + w_.bg[size_t(o)];
    }
    for (int64_t k = 0; k < c; ++k) g[k] = gate_of(z[k], z[c + k]);
    if (outputs_[kWaveY].allocation)
      for (int64_t k = 0; k < c; ++k) put(kWaveY, n, k, t, x_at(n, k, t) + project(w_.wr, w_.br, k, g));
    if (outputs_[kWaveS].allocation)
      for (int64_t k = 0; k < geometry_.skip_channels; ++k) put(kWaveS, n, k, t, project(w_.ws, w_.bs, k, g));
    if (outputs_[kWaveG].allocation)
      for (int64_t k = 0; k < c; ++k) put(kWaveG, n, k, t, g[k]);
  }
  // Row k of a 1x1 projection of g, plus its bias.
  float project(const std::vector<float>& w, const std::vector<float>& b, int64_t k, const float* g) const {
    const int64_t c = geometry_.channels;
    float sum = 0;
    for (int64_t j = 0; j < c; ++j) sum += w[size_t(k * c + j)] * g[j];
    return sum + b[size_t(k)];
  }

  TensorView x_;
  std::array<TensorView, 3> outputs_;  // Y, S, G; an absent one has no allocation
  WaveNetLayerGeometry geometry_;
  LayerWeights w_;
};

Result<KernelPtr> make_wavenet_layer(const KernelRequest& r) {
  STRIDER_ASSIGN_OR_RETURN(WaveNetLayerGeometry g, wavenet_layer_geometry(r.graph, r.node));
  const int64_t c = g.channels, s = g.skip_channels;
  LayerWeights w;
  STRIDER_ASSIGN_OR_RETURN(w.wg, constant_floats(r, kWaveGateW, 2 * c * c * g.taps, true));
  STRIDER_ASSIGN_OR_RETURN(w.bg, constant_floats(r, kWaveGateB, 2 * c, false));
  if (r.has_input(kWaveResW)) {
    STRIDER_ASSIGN_OR_RETURN(w.wr, constant_floats(r, kWaveResW, c * c, true));
    STRIDER_ASSIGN_OR_RETURN(w.br, constant_floats(r, kWaveResB, c, false));
  }
  if (r.has_input(kWaveSkipW)) {
    STRIDER_ASSIGN_OR_RETURN(w.ws, constant_floats(r, kWaveSkipW, s * c, true));
    STRIDER_ASSIGN_OR_RETURN(w.bs, constant_floats(r, kWaveSkipB, s, false));
  }
  switch (r.inputs.at(kWaveX).dtype) {
    case DType::kF32: return KernelPtr(new WaveNetLayerKernel<float>(r, g, std::move(w)));
    case DType::kBF16: return KernelPtr(new WaveNetLayerKernel<bf16>(r, g, std::move(w)));
    case DType::kF16: return KernelPtr(new WaveNetLayerKernel<f16>(r, g, std::move(w)));
    default: return unsupported(fmt::format("{}: FusedWaveNetLayer in {}", describe_node(r.node), dtype_name(r.inputs[0].dtype)));
  }
}

}  // namespace

void register_wavenet_layer_kernels(std::vector<KernelEntry>& table) {
  table.push_back({kFusedWaveNetLayerOp, make_wavenet_layer});
}

}  // namespace strider::cpu
