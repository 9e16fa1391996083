// The normalization family on the CPU (ops/normalization.h): one kernel walks the rows
// and inner elements of hal/normalization_views.h for every op of the family. Statistics
// accumulate in double (two passes: the mean, then the squared deviations), so a row of
// large values with a small spread keeps its variance; y is rounded once, on store.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "base/cache_aligned.h"
#include "hal/cpu/cpu_kernels.h"
#include "hal/cpu/dtype_dispatch.h"
#include "hal/cpu/parallel.h"
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
    if (dense_rows_) return run_dense_rows();
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
  std::string implementation() const override { return "strider:" + op_ + (dense_rows_ ? " (dense rows)" : ""); }

 private:
  // Whether every row's elements are one stride-1 run in x and y and scale / bias are
  // absent or one stride-1 row shared by every row (LayerNormalization and RMSNormalization
  // over the last axes, the transformer case): then a row is a few vectorized loops.
  static bool is_dense_rows(const NormalizationViews& v) {
    auto one_run = [&](int k) {
      int64_t expected = 1;
      for (size_t d = v.inner_sizes.size(); d-- > 0;) {
        if (v.inner_sizes[d] == 1) continue;
        if (v.inner_strides[size_t(k)][d] != expected) return false;
        expected *= v.inner_sizes[d];
      }
      return true;
    };
    auto shared_row = [&](int k) {
      if (!v.views[size_t(k)].allocation) return true;
      for (int64_t s : v.row_strides[size_t(k)])
        if (s != 0) return false;
      return one_run(k);
    };
    return one_run(kNormX) && one_run(kNormY) && shared_row(kNormScale) && shared_row(kNormBias);
  }

  // Rows split over the session's threads. The mean and the squared deviations still
  // accumulate in double, two passes, in any order (omp simd), so a row of large values
  // with a small spread keeps its variance; y is computed in the dtype's compute precision.
  Status run_dense_rows() {
    using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
    const T* scale = v_.views[kNormScale].allocation ? v_.views[kNormScale].host_data_as<T>() : nullptr;
    const T* bias = v_.views[kNormBias].allocation ? v_.views[kNormBias].host_data_as<T>() : nullptr;
    const int64_t row_count = num_elements(v_.row_sizes), n = v_.inner_count;
    if (row_count == 0) return Status::ok();
    if (rows_.empty()) {
      threads_ = max_parallel_threads();
      row_stride_ = cache_lines_of<C>(size_t(std::max<int64_t>(n, 1)) * 3);  // x, scale, bias as C
      rows_.resize(size_t(threads_) * row_stride_);
    }
    parallel_for(row_count, n * 4, [&](int64_t begin, int64_t end, int thread) {
      C* xs = rows_.data() + size_t(thread) * row_stride_;
      C* gamma = xs + n;
      C* beta = gamma + n;
      for (int64_t i = 0; i < n; ++i) gamma[i] = scale ? C(load(scale[i])) : C(1);
      for (int64_t i = 0; i < n; ++i) beta[i] = bias ? C(load(bias[i])) : C(0);
      Odometer<kNormOperands> rows{v_.row_sizes, pointers(v_.row_strides)};
      for (int64_t skip = 0; skip < begin; ++skip) rows.next();
      for (int64_t r = begin; r < end; ++r, rows.next()) dense_row(rows.offset, xs, gamma, beta, n);
    }, threads_);
    return Status::ok();
  }

  template <typename C>
  void dense_row(const std::array<int64_t, kNormOperands>& base, C* xs, const C* gamma, const C* beta,
                 int64_t n) const {
    const T* x = v_.views[kNormX].host_data_as<T>() + base[kNormX];
    T* y = v_.views[kNormY].host_data_as<T>() + base[kNormY];
    for (int64_t i = 0; i < n; ++i) xs[i] = C(load(x[i]));
    double mean = 0, var = 0;
    if (p_.subtract_mean) {
#pragma omp simd reduction(+ : mean)
      for (int64_t i = 0; i < n; ++i) mean += double(xs[i]);
      mean = n ? mean / double(n) : 0.0;
    }
#pragma omp simd reduction(+ : var)
    for (int64_t i = 0; i < n; ++i) {
      const double d = double(xs[i]) - mean;
      var += d * d;
    }
    var = n ? var / double(n) : 0.0;
    const double inv_std = p_.epsilon_after_sqrt ? 1.0 / (std::sqrt(var) + p_.epsilon) : 1.0 / std::sqrt(var + p_.epsilon);
    const C m = C(mean), s = C(inv_std);
    for (int64_t i = 0; i < n; ++i) y[i] = store<T>(ComputeType<T>((xs[i] - m) * s * gamma[i] + beta[i]));
    if (v_.views[kNormMean].allocation) store_statistic(v_.views[kNormMean], base[kNormMean], mean);
    if (v_.views[kNormInvStd].allocation) store_statistic(v_.views[kNormInvStd], base[kNormInvStd], inv_std);
  }

  static std::array<const Strides*, kNormOperands> pointers(const std::array<Strides, kNormOperands>& s) {
    std::array<const Strides*, kNormOperands> p{};
    for (size_t k = 0; k < p.size(); ++k) p[k] = &s[k];
    return p;
  }

  NormalizationParams p_;
  NormalizationViews v_;
  std::string op_;
  bool dense_rows_ = is_dense_rows(v_);
  int threads_ = 1;
  CacheAlignedVector<std::conditional_t<std::is_same_v<T, double>, double, float>> rows_;  // per thread: x, scale, bias
  size_t row_stride_ = 0;  // one thread's rows, in whole cache lines
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
