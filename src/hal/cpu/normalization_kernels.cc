// The normalization family on the CPU (ops/normalization.h): one kernel walks the rows
// and inner elements of hal/normalization_views.h for every op of the family. Statistics
// accumulate in double (two passes: the mean, then the squared deviations), so a row of
// large values with a small spread keeps its variance; y is rounded once, on store.
#include <fmt/format.h>

#include <cmath>

#include "hal/cpu/cpu_kernels.h"
#include "hal/cpu/dtype_dispatch.h"
#include "hal/cpu/strided_loop.h"
#include "hal/normalization_views.h"

namespace strider::cpu {
namespace {

// Element offsets of N operands along an odometer over `sizes`, advanced one element at a time.
template <size_t N>
struct Odometer {
  const Shape& sizes;
  const std::array<const Strides*, N> strides;
  std::vector<int64_t> index = std::vector<int64_t>(sizes.size(), 0);
  std::array<int64_t, N> offset{};

  void next() {
    for (size_t d = sizes.size(); d-- > 0;) {
      for (size_t k = 0; k < N; ++k) offset[k] += (*strides[k])[d];
      if (++index[d] < sizes[d]) return;
      for (size_t k = 0; k < N; ++k) offset[k] -= (*strides[k])[d] * sizes[d];
      index[d] = 0;
    }
  }
};

void store_statistic(const TensorView& view, int64_t offset, double value) {
  std::byte* p = view.host_data() + offset * dtype_size(view.dtype);
  switch (view.dtype) {
    case DType::kF64: *reinterpret_cast<double*>(p) = value; break;
    case DType::kF16: *reinterpret_cast<f16*>(p) = f16::from_float(float(value)); break;
    case DType::kBF16: *reinterpret_cast<bf16*>(p) = bf16::from_float(float(value)); break;
    default: *reinterpret_cast<float*>(p) = float(value); break;
  }
}

template <typename T>
class NormalizationKernel final : public Kernel {
 public:
  NormalizationKernel(NormalizationParams params, NormalizationViews views, std::string op)
      : p_(std::move(params)), v_(std::move(views)), op_(std::move(op)) {}

  Status run(const QueueContext&) override {
    const T* x = v_.views[kNormX].host_data_as<T>();
    T* y = v_.views[kNormY].host_data_as<T>();
    const T* scale = v_.views[kNormScale].allocation ? v_.views[kNormScale].host_data_as<T>() : nullptr;
    const T* bias = v_.views[kNormBias].allocation ? v_.views[kNormBias].host_data_as<T>() : nullptr;
    Odometer<kNormOperands> rows{v_.row_sizes, pointers(v_.row_strides)};
    const int64_t row_count = num_elements(v_.row_sizes), n = v_.inner_count;
    for (int64_t r = 0; r < row_count; ++r, rows.next()) {
      const auto& base = rows.offset;
      double mean = 0, var = 0;
      if (p_.subtract_mean) {
        Odometer<1> in{v_.inner_sizes, {&v_.inner_strides[kNormX]}};
        for (int64_t i = 0; i < n; ++i, in.next()) mean += double(load(x[base[kNormX] + in.offset[0]]));
        mean = n ? mean / double(n) : 0.0;
      }
      Odometer<1> in{v_.inner_sizes, {&v_.inner_strides[kNormX]}};
      for (int64_t i = 0; i < n; ++i, in.next()) {
        double d = double(load(x[base[kNormX] + in.offset[0]])) - mean;
        var += d * d;
      }
      var = n ? var / double(n) : 0.0;
      const double inv_std = p_.epsilon_after_sqrt ? 1.0 / (std::sqrt(var) + p_.epsilon) : 1.0 / std::sqrt(var + p_.epsilon);
      Odometer<4> out{v_.inner_sizes, {&v_.inner_strides[kNormX], &v_.inner_strides[kNormY],
                                      &v_.inner_strides[kNormScale], &v_.inner_strides[kNormBias]}};
      for (int64_t i = 0; i < n; ++i, out.next()) {
        double value = (double(load(x[base[kNormX] + out.offset[0]])) - mean) * inv_std;
        if (scale) value *= double(load(scale[base[kNormScale] + out.offset[2]]));
        if (bias) value += double(load(bias[base[kNormBias] + out.offset[3]]));
        y[base[kNormY] + out.offset[1]] = store<T>(ComputeType<T>(value));
      }
      if (v_.views[kNormMean].allocation) store_statistic(v_.views[kNormMean], base[kNormMean], mean);
      if (v_.views[kNormInvStd].allocation) store_statistic(v_.views[kNormInvStd], base[kNormInvStd], inv_std);
    }
    return Status::ok();
  }
  std::string implementation() const override { return "strider:" + op_; }

 private:
  static std::array<const Strides*, kNormOperands> pointers(const std::array<Strides, kNormOperands>& s) {
    std::array<const Strides*, kNormOperands> p{};
    for (size_t k = 0; k < p.size(); ++k) p[k] = &s[k];
    return p;
  }

  NormalizationParams p_;
  NormalizationViews v_;
  std::string op_;
};

Result<std::unique_ptr<Kernel>> make_normalization(const KernelRequest& r) {
  NodeInputs node(r.graph, r.node);
  STRIDER_ASSIGN_OR_RETURN(NormalizationParams p, resolve_normalization(node));
  const std::array<TensorView, kNormOperands> operands = normalization_operands(p, r);
  STRIDER_ASSIGN_OR_RETURN(NormalizationViews views, normalization_views(p, operands));
  return dispatch_dtype(r.inputs[0].dtype, [&]<typename T>() -> Result<std::unique_ptr<Kernel>> {
    if constexpr (is_float_storage_v<T>)
      return std::unique_ptr<Kernel>(new NormalizationKernel<T>(p, views, r.node.op_type));
    else
      return unsupported(fmt::format("{} on {}", r.node.op_type, dtype_name(r.inputs[0].dtype)));
  });
}

}  // namespace

void register_normalization_kernels(std::vector<KernelEntry>& table) {
  for (std::string_view op : {"LayerNormalization", "RMSNormalization", "InstanceNormalization", "GroupNormalization",
                              "MeanVarianceNormalization"})
    table.push_back({op, make_normalization});
}

}  // namespace strider::cpu
