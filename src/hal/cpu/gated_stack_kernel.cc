// FusedGatedStack on the CPU (ops/gated_stack.h): each pixel's channels through every unit
// in f32, in a scratch row per thread. The CPU forms the node for no model
// (Device::fuses_gated_stack stays false: its convolutions are oneDNN's, and nothing was
// measured); the kernel exists so that the kernel suite checks the op on cpu and sim, and
// as the plain statement of what the CUDA kernel computes.
#include <fmt/format.h>

#include "hal/cpu/cpu_kernels.h"
#include "hal/cpu/dtype_dispatch.h"
#include "hal/cpu/parallel.h"
#include "ops/gated_stack.h"
#include "ops/gated_stack_math.h"

namespace strider::cpu {
namespace {

using KernelPtr = std::unique_ptr<Kernel>;

// A pixel's element offsets in X and Y: pixel p of image n is spatial index p of X's
// spatial axes (row-major), at n * strides[0] + sum over spatial axes.
struct PixelWalk {
  Shape spatial;
  Strides x_strides, y_strides;  // spatial axes
  int64_t x_image = 0, y_image = 0, x_channel = 0, y_channel = 0;

  std::pair<int64_t, int64_t> offsets(int64_t column) const {
    int64_t pixels = 1;
    for (int64_t s : spatial) pixels *= s;
    int64_t n = column / pixels, p = column % pixels, xo = n * x_image, yo = n * y_image;
    for (size_t d = spatial.size(); d-- > 0;) {
      const int64_t i = p % spatial[d];
      p /= spatial[d];
      xo += i * x_strides[d], yo += i * y_strides[d];
    }
    return {xo, yo};
  }
};

template <typename T>
class GatedStackKernel final : public Kernel {
 public:
  GatedStackKernel(TensorView x, TensorView y, std::vector<float> weights, int64_t units)
      : x_(std::move(x)), y_(std::move(y)), weights_(std::move(weights)), units_(units), c_(x_.sizes[1]) {
    walk_.spatial.assign(x_.sizes.begin() + 2, x_.sizes.end());
    walk_.x_strides.assign(x_.strides.begin() + 2, x_.strides.end());
    walk_.y_strides.assign(y_.strides.begin() + 2, y_.strides.end());
    walk_.x_image = x_.strides[0], walk_.y_image = y_.strides[0];
    walk_.x_channel = x_.strides[1], walk_.y_channel = y_.strides[1];
  }

  Status run(const QueueContext&) override {
    const int64_t columns = num_elements(x_.sizes) / std::max<int64_t>(c_, 1);
    const T* x = x_.host_data_as<T>();
    T* y = y_.host_data_as<T>();
    parallel_for(columns, units_ * 4 * c_ * c_, [&](int64_t begin, int64_t end, int) {
      std::vector<float> h(static_cast<size_t>(c_)), z(static_cast<size_t>(2 * c_));
      for (int64_t column = begin; column < end; ++column) {
        const auto [xo, yo] = walk_.offsets(column);
        for (int64_t k = 0; k < c_; ++k) h[size_t(k)] = float(load(x[xo + k * walk_.x_channel]));
        for (int64_t u = 0; u < units_; ++u) unit(u, h.data(), z.data());
        for (int64_t k = 0; k < c_; ++k) y[yo + k * walk_.y_channel] = store<T>(h[size_t(k)]);
      }
    });
    return Status::ok();
  }
  std::string implementation() const override { return fmt::format("strider:gated-stack ({} units)", units_); }

 private:
  // One unit over a pixel's h: z = W h + B (row o of W at weights_ + u * (2C C + 2C)),
  // then each channel's gate.
  void unit(int64_t u, float* h, float* z) const {
    const float* w = weights_.data() + size_t(u * (2 * c_ * c_ + 2 * c_));
    const float* bias = w + 2 * c_ * c_;
    for (int64_t o = 0; o < 2 * c_; ++o) {
      float sum = 0;
      for (int64_t k = 0; k < c_; ++k) sum += w[o * c_ + k] * h[k];
      z[o] = sum + bias[o];
    }
    for (int64_t k = 0; k < c_; ++k) h[k] = gated_residual(h[k], z[k], z[c_ + k]);
  }

  TensorView x_, y_;
  std::vector<float> weights_;  // per unit: W [2C, C] then B [2C], f32
  int64_t units_, c_;
  PixelWalk walk_;
};

// The units' weights and biases as f32, W row-major [2C, C] then B [2C] (zeros when absent).
Result<std::vector<float>> stack_weights(const KernelRequest& r, int64_t units, int64_t c) {
  std::vector<float> out;
  out.reserve(size_t(units * (2 * c * c + 2 * c)));
  for (int64_t u = 0; u < units; ++u) {
    const Tensor* w = r.constant_input(size_t(1 + 2 * u));
    const Tensor* b = r.constant_input(size_t(2 + 2 * u));
    if (w == nullptr || w->num_elements() != 2 * c * c)
      return unsupported(fmt::format("{}: unit {}'s weights are not a constant", describe_node(r.node), u));
    if (r.has_input(size_t(2 + 2 * u)) && b == nullptr)
      return unsupported(fmt::format("{}: unit {}'s bias is not a constant", describe_node(r.node), u));
    for (int64_t i = 0; i < 2 * c * c; ++i) out.push_back(float(w->element_as_double(i)));
    for (int64_t i = 0; i < 2 * c; ++i) out.push_back(b ? float(b->element_as_double(i)) : 0.0f);
  }
  return out;
}

Result<KernelPtr> make_gated_stack(const KernelRequest& r) {
  const TensorView &x = r.inputs.at(0), &y = r.outputs.at(0);
  const int64_t units = gated_stack_units(r.node);
  STRIDER_ASSIGN_OR_RETURN(std::vector<float> weights, stack_weights(r, units, x.sizes.at(1)));
  switch (x.dtype) {
    case DType::kF32: return KernelPtr(new GatedStackKernel<float>(x, y, std::move(weights), units));
    case DType::kBF16: return KernelPtr(new GatedStackKernel<bf16>(x, y, std::move(weights), units));
    case DType::kF16: return KernelPtr(new GatedStackKernel<f16>(x, y, std::move(weights), units));
    default: return unsupported(fmt::format("{}: FusedGatedStack in {}", describe_node(r.node), dtype_name(x.dtype)));
  }
}

}  // namespace

void register_gated_stack_kernels(std::vector<KernelEntry>& table) {
  table.push_back({kFusedGatedStackOp, make_gated_stack});
}

}  // namespace strider::cpu
