// Elementwise CPU kernels: unary math, binary arithmetic and logic with broadcasting,
// comparisons, Where, Clip, Pow and the variadic Sum/Min/Max/Mean.
#include <algorithm>
#include <cmath>
#include <limits>

#include "base/checked_math.h"
#include "hal/cpu/cpu_kernels.h"
#include "hal/cpu/map_kernel.h"

namespace strider::cpu {
namespace {

using KernelPtr = std::unique_ptr<Kernel>;

Status unsupported_dtype(const KernelRequest& r, DType dtype) {
  return unsupported(fmt::format("{} on {} is not supported", r.node.op_type, dtype_name(dtype)));
}

// Unary op on floating types only.
template <typename Fn>
Result<KernelPtr> float_unary(const KernelRequest& r, Fn fn) {
  return dispatch_dtype(r.inputs[0].dtype, [&]<typename T>() -> Result<KernelPtr> {
    if constexpr (is_float_storage_v<T>)
      return make_map_kernel<T, T>(r.node.op_type, r.outputs[0], {r.inputs[0]}, fn);
    else
      return unsupported_dtype(r, r.inputs[0].dtype);
  });
}

// Unary op on every numeric type (not bool).
template <typename Fn>
Result<KernelPtr> numeric_unary(const KernelRequest& r, Fn fn) {
  return dispatch_dtype(r.inputs[0].dtype, [&]<typename T>() -> Result<KernelPtr> {
    if constexpr (!std::is_same_v<T, bool>)
      return make_map_kernel<T, T>(r.node.op_type, r.outputs[0], {r.inputs[0]}, fn);
    else
      return unsupported_dtype(r, r.inputs[0].dtype);
  });
}

// Binary op on every numeric type (not bool); TOut is TIn or bool (comparisons).
template <bool kBoolResult, typename Fn>
Result<KernelPtr> numeric_binary(const KernelRequest& r, Fn fn) {
  return dispatch_dtype(r.inputs[0].dtype, [&]<typename T>() -> Result<KernelPtr> {
    using TOut = std::conditional_t<kBoolResult, bool, T>;
    if constexpr (!std::is_same_v<T, bool>)
      return make_map_kernel<TOut, T, T>(r.node.op_type, r.outputs[0], {r.inputs[0], r.inputs[1]},
                                         fn);
    else
      return unsupported_dtype(r, r.inputs[0].dtype);
  });
}

template <typename Fn>
Result<KernelPtr> bool_unary(const KernelRequest& r, Fn fn) {
  if (r.inputs[0].dtype != DType::kBool) return unsupported_dtype(r, r.inputs[0].dtype);
  return make_map_kernel<bool, bool>(r.node.op_type, r.outputs[0], {r.inputs[0]}, fn);
}
template <typename Fn>
Result<KernelPtr> bool_binary(const KernelRequest& r, Fn fn) {
  if (r.inputs[0].dtype != DType::kBool) return unsupported_dtype(r, r.inputs[0].dtype);
  return make_map_kernel<bool, bool, bool>(r.node.op_type, r.outputs[0], {r.inputs[0], r.inputs[1]}, fn);
}

// --- functors; C is the compute type (float, double, or an integer type) ----------------
struct Sigmoid {
  template <class C> C operator()(C x) const { return C(1) / (C(1) + std::exp(-x)); }
};
struct Tanh { template <class C> C operator()(C x) const { return std::tanh(x); } };
struct Exp { template <class C> C operator()(C x) const { return std::exp(x); } };
struct Log { template <class C> C operator()(C x) const { return std::log(x); } };
struct Sqrt { template <class C> C operator()(C x) const { return std::sqrt(x); } };
struct Erf { template <class C> C operator()(C x) const { return std::erf(x); } };
struct Floor { template <class C> C operator()(C x) const { return std::floor(x); } };
struct Ceil { template <class C> C operator()(C x) const { return std::ceil(x); } };
struct Sin { template <class C> C operator()(C x) const { return std::sin(x); } };
struct Cos { template <class C> C operator()(C x) const { return std::cos(x); } };
struct Reciprocal { template <class C> C operator()(C x) const { return C(1) / x; } };
struct Softplus {
  // log(1 + e^x), exact for large x where e^x would overflow.
  template <class C> C operator()(C x) const { return x > C(20) ? x : std::log1p(std::exp(x)); }
};
struct HardSwish {
  template <class C> C operator()(C x) const {
    return x * std::max(C(0), std::min(C(1), x / C(6) + C(0.5)));
  }
};
struct HardSigmoid {
  float alpha, beta;
  template <class C> C operator()(C x) const {
    return std::max(C(0), std::min(C(1), C(alpha) * x + C(beta)));
  }
};
struct LeakyRelu {
  float alpha;
  template <class C> C operator()(C x) const { return x < C(0) ? C(alpha) * x : x; }
};
struct Elu {
  float alpha;
  template <class C> C operator()(C x) const { return x < C(0) ? C(alpha) * (std::exp(x) - C(1)) : x; }
};
struct Selu {
  float alpha, gamma;
  template <class C> C operator()(C x) const {
    return C(gamma) * (x > C(0) ? x : C(alpha) * (std::exp(x) - C(1)));
  }
};
struct Relu { template <class C> C operator()(C x) const { return x > C(0) ? x : C(0); } };
// Integer ops wrap on overflow (base/checked_math.h): Neg and Abs of INT64_MIN give it back.
struct Neg { template <class C> C operator()(C x) const { return wrapping_neg(x); } };
struct Abs { template <class C> C operator()(C x) const { return x < C(0) ? wrapping_neg(x) : x; } };

struct Add { template <class C> C operator()(C a, C b) const { return wrapping_add(a, b); } };
struct Sub { template <class C> C operator()(C a, C b) const { return wrapping_sub(a, b); } };
struct Mul { template <class C> C operator()(C a, C b) const { return wrapping_mul(a, b); } };
struct Div {
  template <class C> C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) {
      // Integer division by zero or MIN / -1 would trap: define them instead of crashing.
      if (b == 0) return C(0);
      if (std::is_signed_v<C> && b == C(-1)) return wrapping_neg(a);
    }
    return C(a / b);
  }
};
struct Min { template <class C> C operator()(C a, C b) const { return std::isnan(double(a)) || a < b ? a : b; } };
struct Max { template <class C> C operator()(C a, C b) const { return std::isnan(double(a)) || a > b ? a : b; } };
struct Equal { template <class C> bool operator()(C a, C b) const { return a == b; } };
struct Less { template <class C> bool operator()(C a, C b) const { return a < b; } };
struct Greater { template <class C> bool operator()(C a, C b) const { return a > b; } };
struct LessOrEqual { template <class C> bool operator()(C a, C b) const { return a <= b; } };
struct GreaterOrEqual { template <class C> bool operator()(C a, C b) const { return a >= b; } };
struct And { bool operator()(bool a, bool b) const { return a && b; } };
struct Or { bool operator()(bool a, bool b) const { return a || b; } };
struct Xor { bool operator()(bool a, bool b) const { return a != b; } };
struct Not { bool operator()(bool a) const { return !a; } };
struct Select {
  template <class C> C operator()(bool c, C a, C b) const { return c ? a : b; }
};

template <typename Fn>
KernelFactory float_unary_factory() {
  return [](const KernelRequest& r) { return float_unary(r, Fn{}); };
}

Result<KernelPtr> make_leaky_relu(const KernelRequest& r) {
  STRIDER_ASSIGN_OR_RETURN(float alpha, r.node.attributes.get_float("alpha", 0.01f));
  return float_unary(r, LeakyRelu{alpha});
}
Result<KernelPtr> make_hard_sigmoid(const KernelRequest& r) {
  STRIDER_ASSIGN_OR_RETURN(float alpha, r.node.attributes.get_float("alpha", 0.2f));
  STRIDER_ASSIGN_OR_RETURN(float beta, r.node.attributes.get_float("beta", 0.5f));
  return float_unary(r, HardSigmoid{alpha, beta});
}
Result<KernelPtr> make_elu(const KernelRequest& r) {
  STRIDER_ASSIGN_OR_RETURN(float alpha, r.node.attributes.get_float("alpha", 1.0f));
  return float_unary(r, Elu{alpha});
}
Result<KernelPtr> make_selu(const KernelRequest& r) {
  STRIDER_ASSIGN_OR_RETURN(float alpha, r.node.attributes.get_float("alpha", 1.67326319217681884765625f));
  STRIDER_ASSIGN_OR_RETURN(float gamma, r.node.attributes.get_float("gamma", 1.05070102214813232421875f));
  return float_unary(r, Selu{alpha, gamma});
}

Result<KernelPtr> make_where(const KernelRequest& r) {
  if (r.inputs[0].dtype != DType::kBool) return unsupported_dtype(r, r.inputs[0].dtype);
  return dispatch_dtype(r.inputs[1].dtype, [&]<typename T>() -> Result<KernelPtr> {
    return make_map_kernel<T, bool, T, T>("Where", r.outputs[0],
                                          {r.inputs[0], r.inputs[1], r.inputs[2]}, Select{});
  });
}

// Clip's bounds are optional scalar inputs (opset >= 11) or attributes (< 11). Input
// bounds are read from their views at each run, so computed bounds work too.
template <typename T>
class ClipKernel final : public Kernel {
  using C = ComputeType<T>;

 public:
  struct ClipFn {
    const std::array<C, 2>* bounds;
    C operator()(C x) const {
      // min(max(x, low), high): when low > high every value becomes high, as ONNX says.
      const auto& [low, high] = *bounds;
      C raised = x < low ? low : x;
      return raised > high ? high : raised;
    }
  };

  ClipKernel(TensorView low, TensorView high, C low_default, C high_default)
      : low_(std::move(low)), high_(std::move(high)), bounds_{low_default, high_default} {}
  Status init(const TensorView& out, const TensorView& in) {
    STRIDER_ASSIGN_OR_RETURN(map_, make_map_kernel<T, T>("Clip", out, {in}, ClipFn{&bounds_}));
    return Status::ok();
  }
  Status run(const QueueContext& context) override {
    if (low_.allocation) bounds_[0] = load(*low_.host_data_as<T>());
    if (high_.allocation) bounds_[1] = load(*high_.host_data_as<T>());
    return map_->run(context);
  }
  std::string implementation() const override { return "strider:Clip"; }

 private:
  TensorView low_, high_;
  std::array<C, 2> bounds_;
  KernelPtr map_;
};

Result<KernelPtr> make_clip(const KernelRequest& r) {
  const AttributeMap& a = r.node.attributes;
  STRIDER_ASSIGN_OR_RETURN(float low, a.get_float("min", -std::numeric_limits<float>::infinity()));
  STRIDER_ASSIGN_OR_RETURN(float high, a.get_float("max", std::numeric_limits<float>::infinity()));
  TensorView low_view = r.has_input(1) ? r.inputs[1] : TensorView{};
  TensorView high_view = r.has_input(2) ? r.inputs[2] : TensorView{};
  return dispatch_dtype(r.inputs[0].dtype, [&]<typename T>() -> Result<KernelPtr> {
    if constexpr (std::is_same_v<T, bool>) {
      return unsupported_dtype(r, r.inputs[0].dtype);
    } else {
      using C = ComputeType<T>;
      C lo = std::numeric_limits<C>::lowest(), hi = std::numeric_limits<C>::max();
      if constexpr (!std::is_integral_v<C>) {
        lo = C(low);
        hi = C(high);
      }
      auto kernel = std::make_unique<ClipKernel<T>>(low_view, high_view, lo, hi);
      STRIDER_RETURN_IF_ERROR(kernel->init(r.outputs[0], r.inputs[0]));
      return KernelPtr(std::move(kernel));
    }
  });
}

// Pow: the exponent may have another numeric type than the base.
struct Pow {
  template <class B, class E> B operator()(B base, E exponent) const {
    if constexpr (std::is_integral_v<B>) {
      return saturate_to_int<B>(std::pow(double(base), double(exponent)));
    } else {
      return B(std::pow(base, B(exponent)));
    }
  }
};

Result<KernelPtr> make_pow(const KernelRequest& r) {
  return dispatch_dtype(r.inputs[0].dtype, [&]<typename B>() -> Result<KernelPtr> {
    if constexpr (std::is_same_v<B, bool> || std::is_same_v<B, int8_t> || std::is_same_v<B, uint8_t>) {
      return unsupported_dtype(r, r.inputs[0].dtype);
    } else {
      return dispatch_dtype(r.inputs[1].dtype, [&]<typename E>() -> Result<KernelPtr> {
        if constexpr (std::is_same_v<E, bool>) {
          return unsupported_dtype(r, r.inputs[1].dtype);
        } else {
          return make_map_kernel<B, B, E>("Pow", r.outputs[0], {r.inputs[0], r.inputs[1]}, Pow{});
        }
      });
    }
  });
}

// Sum, Min, Max, Mean over any number of inputs: a chain of binary maps into the output
// (the output is written first from inputs 0 and 1, then combined with each next input).
class VariadicKernel final : public Kernel {
 public:
  VariadicKernel(std::vector<KernelPtr> steps, std::string name)
      : steps_(std::move(steps)), name_(std::move(name)) {}
  Status run(const QueueContext& context) override {
    for (auto& step : steps_) STRIDER_RETURN_IF_ERROR(step->run(context));
    return Status::ok();
  }
  std::string implementation() const override { return "strider:" + name_; }

 private:
  std::vector<KernelPtr> steps_;
  std::string name_;
};

template <typename Fn>
Result<KernelPtr> make_variadic(const KernelRequest& r, Fn fn, bool mean) {
  const TensorView& out = r.outputs[0];
  std::vector<KernelPtr> steps;
  return dispatch_dtype(out.dtype, [&]<typename T>() -> Result<KernelPtr> {
    if constexpr (std::is_same_v<T, bool>) {
      return unsupported_dtype(r, out.dtype);
    } else {
      size_t n = r.inputs.size();
      if (n == 1) {
        STRIDER_ASSIGN_OR_RETURN(KernelPtr k, make_map_kernel<T, T>(r.node.op_type, out, {r.inputs[0]}, [](auto x) { return x; }));
        steps.push_back(std::move(k));
      } else {
        STRIDER_ASSIGN_OR_RETURN(KernelPtr k, make_map_kernel<T, T, T>(r.node.op_type, out, {r.inputs[0], r.inputs[1]}, fn));
        steps.push_back(std::move(k));
      }
      for (size_t i = 2; i < n; ++i) {
        STRIDER_ASSIGN_OR_RETURN(KernelPtr k, make_map_kernel<T, T, T>(r.node.op_type, out, {out, r.inputs[i]}, fn));
        steps.push_back(std::move(k));
      }
      if (mean) {
        double inverse = 1.0 / double(n);
        auto scale = [inverse](auto x) { return decltype(x)(double(x) * inverse); };
        STRIDER_ASSIGN_OR_RETURN(KernelPtr k, make_map_kernel<T, T>("Mean", out, {out}, scale));
        steps.push_back(std::move(k));
      }
      return KernelPtr(new VariadicKernel(std::move(steps), r.node.op_type));
    }
  });
}

// BatchNormalization (inference): y = x * a[c] + b[c] with a = scale / sqrt(var + eps) and
// b = B - mean * a, computed in the compute type at each run from the parameter views.
template <typename T>
class BatchNormKernel final : public Kernel {
  using C = ComputeType<T>;

 public:
  struct AffineFn {
    C operator()(C x, C a, C b) const { return x * a + b; }
  };
  BatchNormKernel(std::array<TensorView, 4> params, float epsilon, int64_t channels)
      : params_(std::move(params)), epsilon_(epsilon), coefficients_(size_t(2 * channels)) {
    coefficient_memory_ = std::make_unique<Allocation>(
        0, "batchnorm-coefficients", "cpu", reinterpret_cast<std::byte*>(coefficients_.data()),
        int64_t(coefficients_.size() * sizeof(C)), int64_t(alignof(C)), StorageMode::kHost, true);
  }
  Status init(const TensorView& x, const TensorView& y) {
    int64_t channels = x.sizes[1];
    // a and b as [C, 1, ...] views broadcast over x's other dims.
    Shape sizes(size_t(x.rank()), 1);
    sizes[1] = channels;
    Strides strides(size_t(x.rank()), 0);
    strides[1] = 1;
    DType compute = std::is_same_v<C, double> ? DType::kF64 : DType::kF32;
    STRIDER_ASSIGN_OR_RETURN(TensorView a, make_view(*coefficient_memory_, 0, compute, sizes, strides, "a"));
    STRIDER_ASSIGN_OR_RETURN(TensorView b, make_view(*coefficient_memory_, channels * int64_t(sizeof(C)),
                                                     compute, sizes, strides, "b"));
    STRIDER_ASSIGN_OR_RETURN(map_, (make_map_kernel<T, T, C, C>("BatchNormalization", y, {x, a, b}, AffineFn{})));
    return Status::ok();
  }
  Status run(const QueueContext& context) override {
    size_t channels = coefficients_.size() / 2;
    for (size_t c = 0; c < channels; ++c) {
      C p[4];
      for (size_t k = 0; k < 4; ++k)
        p[k] = load(params_[k].host_data_as<T>()[int64_t(c) * params_[k].strides[0]]);
      C a = p[0] / std::sqrt(p[3] + C(epsilon_));  // scale / sqrt(var + eps)
      coefficients_[c] = a;
      coefficients_[channels + c] = p[1] - p[2] * a;  // B - mean * a
    }
    return map_->run(context);
  }
  std::string implementation() const override { return "strider:BatchNormalization"; }

 private:
  std::array<TensorView, 4> params_;  // scale, B, mean, var
  float epsilon_;
  std::vector<C> coefficients_;
  std::unique_ptr<Allocation> coefficient_memory_;
  KernelPtr map_;
};

Result<KernelPtr> make_batch_norm(const KernelRequest& r) {
  STRIDER_ASSIGN_OR_RETURN(float epsilon, r.node.attributes.get_float("epsilon", 1e-5f));
  for (size_t i = 1; i < 5; ++i)
    if (r.inputs[i].dtype != r.inputs[0].dtype)
      return unsupported(fmt::format("BatchNormalization with {} input {} and {} data",
                                     dtype_name(r.inputs[i].dtype), i, dtype_name(r.inputs[0].dtype)));
  return dispatch_dtype(r.inputs[0].dtype, [&]<typename T>() -> Result<KernelPtr> {
    if constexpr (is_float_storage_v<T>) {
      auto kernel = std::make_unique<BatchNormKernel<T>>(
          std::array<TensorView, 4>{r.inputs[1], r.inputs[2], r.inputs[3], r.inputs[4]}, epsilon,
          r.inputs[0].sizes[1]);
      STRIDER_RETURN_IF_ERROR(kernel->init(r.inputs[0], r.outputs[0]));
      return KernelPtr(std::move(kernel));
    } else {
      return unsupported_dtype(r, r.inputs[0].dtype);
    }
  });
}

}  // namespace

void register_elementwise_kernels(std::vector<KernelEntry>& table) {
  table.push_back({"Sigmoid", float_unary_factory<Sigmoid>()});
  table.push_back({"Tanh", float_unary_factory<Tanh>()});
  table.push_back({"Exp", float_unary_factory<Exp>()});
  table.push_back({"Log", float_unary_factory<Log>()});
  table.push_back({"Sqrt", float_unary_factory<Sqrt>()});
  table.push_back({"Erf", float_unary_factory<Erf>()});
  table.push_back({"Floor", float_unary_factory<Floor>()});
  table.push_back({"Ceil", float_unary_factory<Ceil>()});
  table.push_back({"Sin", float_unary_factory<Sin>()});
  table.push_back({"Cos", float_unary_factory<Cos>()});
  table.push_back({"Reciprocal", float_unary_factory<Reciprocal>()});
  table.push_back({"Softplus", float_unary_factory<Softplus>()});
  table.push_back({"HardSwish", float_unary_factory<HardSwish>()});
  table.push_back({"LeakyRelu", make_leaky_relu});
  table.push_back({"HardSigmoid", make_hard_sigmoid});
  table.push_back({"Elu", make_elu});
  table.push_back({"Selu", make_selu});
  table.push_back({"Relu", [](const KernelRequest& r) { return numeric_unary(r, Relu{}); }});
  table.push_back({"Neg", [](const KernelRequest& r) { return numeric_unary(r, Neg{}); }});
  table.push_back({"Abs", [](const KernelRequest& r) { return numeric_unary(r, Abs{}); }});
  table.push_back({"Add", [](const KernelRequest& r) { return numeric_binary<false>(r, Add{}); }});
  table.push_back({"Sub", [](const KernelRequest& r) { return numeric_binary<false>(r, Sub{}); }});
  table.push_back({"Mul", [](const KernelRequest& r) { return numeric_binary<false>(r, Mul{}); }});
  table.push_back({"Div", [](const KernelRequest& r) { return numeric_binary<false>(r, Div{}); }});
  table.push_back({"Equal", [](const KernelRequest& r) {
    if (r.inputs[0].dtype == DType::kBool) return bool_binary(r, [](bool a, bool b) { return a == b; });
    return numeric_binary<true>(r, Equal{});
  }});
  table.push_back({"Less", [](const KernelRequest& r) { return numeric_binary<true>(r, Less{}); }});
  table.push_back({"Greater", [](const KernelRequest& r) { return numeric_binary<true>(r, Greater{}); }});
  table.push_back({"LessOrEqual", [](const KernelRequest& r) { return numeric_binary<true>(r, LessOrEqual{}); }});
  table.push_back({"GreaterOrEqual", [](const KernelRequest& r) { return numeric_binary<true>(r, GreaterOrEqual{}); }});
  table.push_back({"And", [](const KernelRequest& r) { return bool_binary(r, And{}); }});
  table.push_back({"Or", [](const KernelRequest& r) { return bool_binary(r, Or{}); }});
  table.push_back({"Xor", [](const KernelRequest& r) { return bool_binary(r, Xor{}); }});
  table.push_back({"Not", [](const KernelRequest& r) { return bool_unary(r, Not{}); }});
  table.push_back({"Where", make_where});
  table.push_back({"Clip", make_clip});
  table.push_back({"Pow", make_pow});
  table.push_back({"BatchNormalization", make_batch_norm});
  table.push_back({"Sum", [](const KernelRequest& r) { return make_variadic(r, Add{}, false); }});
  table.push_back({"Mean", [](const KernelRequest& r) { return make_variadic(r, Add{}, true); }});
  table.push_back({"Min", [](const KernelRequest& r) { return make_variadic(r, Min{}, false); }});
  table.push_back({"Max", [](const KernelRequest& r) { return make_variadic(r, Max{}, false); }});
}

}  // namespace strider::cpu
