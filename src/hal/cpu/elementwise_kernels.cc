// Elementwise CPU kernels: every row of the table in ops/elementwise_math.h (unary math,
// binary arithmetic and logic with broadcasting, comparisons, tests), and Where, Clip, Pow,
// BatchNormalization and the variadic Sum/Min/Max/Mean.
#include <algorithm>
#include <cmath>
#include <limits>

#include "base/checked_math.h"
#include "hal/cpu/cpu_kernels.h"
#include "hal/cpu/map_kernel.h"
#include "ops/elementwise_params.h"
#include "ops/shape_ops.h"

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

// Unary and binary ops on the integer types (not bool): the bitwise ops.
template <bool kUnary, typename Fn>
Result<KernelPtr> integer_map(const KernelRequest& r, Fn fn) {
  return dispatch_dtype(r.inputs[0].dtype, [&]<typename T>() -> Result<KernelPtr> {
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      if constexpr (kUnary) return make_map_kernel<T, T>(r.node.op_type, r.outputs[0], {r.inputs[0]}, fn);
      else return make_map_kernel<T, T, T>(r.node.op_type, r.outputs[0], {r.inputs[0], r.inputs[1]}, fn);
    } else {
      return unsupported_dtype(r, r.inputs[0].dtype);
    }
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

// Every device's kernels for the table's rows (ops/elementwise_math.h) come from here:
// the functor made with the node's parameters, over the dtypes of the row's kind.
template <typename Fn>
Result<KernelPtr> compare(const KernelRequest& r, Fn fn) {
  return dispatch_dtype(r.inputs[0].dtype, [&]<typename T>() -> Result<KernelPtr> {
    return make_map_kernel<bool, T, T>(r.node.op_type, r.outputs[0], {r.inputs[0], r.inputs[1]}, fn);
  });
}

template <typename Fn>
Result<KernelPtr> float_test(const KernelRequest& r, Fn fn) {
  return dispatch_dtype(r.inputs[0].dtype, [&]<typename T>() -> Result<KernelPtr> {
    if constexpr (is_float_storage_v<T>)
      return make_map_kernel<bool, T>(r.node.op_type, r.outputs[0], {r.inputs[0]}, fn);
    else
      return unsupported_dtype(r, r.inputs[0].dtype);
  });
}

// Exp, Sigmoid, Tanh and Erf on the float storage types run as one-instruction fused programs:
// the fused kernel's vectorized rows (hal/cpu/vector_math.h), so a graph computes the same
// bits fused or not (f64 keeps the C library's double math).
constexpr bool has_vector_row(ElementwiseOp op) {
  return op == ElementwiseOp::kExp || op == ElementwiseOp::kSigmoid || op == ElementwiseOp::kTanh ||
         op == ElementwiseOp::kErf;
}

template <ElementwiseOp kOp>
Result<KernelPtr> make_table_kernel(const KernelRequest& r) {
  if constexpr (has_vector_row(kOp)) {
    const DType t = r.inputs[0].dtype;
    if (t == DType::kF32 || t == DType::kBF16 || t == DType::kF16) {
      FusedProgram program;
      program.inputs = 1;
      program.code.push_back(FusedInstruction{kOp, 0, -1, 0.0f, 0.0f});
      return make_fused_program_kernel(program, r.outputs[0], {r.inputs[0]});
    }
  }
  using Traits = ElementwiseTraits<kOp>;
  STRIDER_ASSIGN_OR_RETURN(ElementwiseParams params, resolve_elementwise_params(kOp, r.node.attributes));
  const typename Traits::Fn fn{params};
  constexpr ElementwiseKind kKind = Traits::kKind;
  if constexpr (kKind == ElementwiseKind::kFloatUnary) return float_unary(r, fn);
  else if constexpr (kKind == ElementwiseKind::kNumericUnary) return numeric_unary(r, fn);
  else if constexpr (kKind == ElementwiseKind::kNumericBinary) return numeric_binary<false>(r, fn);
  else if constexpr (kKind == ElementwiseKind::kCompare) return compare(r, fn);
  else if constexpr (kKind == ElementwiseKind::kLogicUnary) return bool_unary(r, fn);
  else if constexpr (kKind == ElementwiseKind::kLogicBinary) return bool_binary(r, fn);
  else if constexpr (kKind == ElementwiseKind::kIntegerUnary) return integer_map<true>(r, fn);
  else if constexpr (kKind == ElementwiseKind::kIntegerBinary) return integer_map<false>(r, fn);
  else return float_test(r, fn);
}

struct Select {
  template <class C> C operator()(bool c, C a, C b) const { return c ? a : b; }
};

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
      if (double(exponent) == 2.0) return B(base * base);  // the same rounding as pow; no libm call
      return B(std::pow(base, B(exponent)));
    }
  }
};

// Pow's base as ONNX types it (T1: int32, int64, float16, bfloat16, float, double; CUDA's
// kernel takes the same): each base is instantiated for every exponent type, and the other
// integer bases doubled that for no model (a fifth of this file's build).
template <typename B>
constexpr bool kPowBase = is_float_storage_v<B> || std::is_same_v<B, int32_t> || std::is_same_v<B, int64_t>;

Result<KernelPtr> make_pow(const KernelRequest& r) {
  return dispatch_dtype(r.inputs[0].dtype, [&]<typename B>() -> Result<KernelPtr> {
    if constexpr (!kPowBase<B>) {
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

// Trilu: Where(mask, x, 0) with the mask of the kept triangle (ops/shape_ops.h) built once
// and broadcast over the batch dims, and a zero of x's type broadcast everywhere.
class TriluKernel final : public Kernel {
 public:
  TriluKernel(Tensor mask) : mask_(std::move(mask)) {
    mask_memory_ = std::make_unique<Allocation>(0, "trilu-mask", "cpu", mask_.bytes(), int64_t(mask_.byte_size()) + 1, 1,
                                                StorageMode::kHost, true);
    zero_memory_ = std::make_unique<Allocation>(0, "trilu-zero", "cpu", reinterpret_cast<std::byte*>(&zero_), 8, 8,
                                                StorageMode::kHost, true);
  }
  Status init(const KernelRequest& r) {
    const TensorView& x = r.inputs[0];
    STRIDER_ASSIGN_OR_RETURN(TensorView mask,
                             make_view(*mask_memory_, 0, DType::kBool, x.sizes, trilu_mask_strides(x.sizes), "mask"));
    STRIDER_ASSIGN_OR_RETURN(TensorView zero, make_view(*zero_memory_, 0, x.dtype, x.sizes, Strides(x.sizes.size(), 0), "zero"));
    return dispatch_dtype(x.dtype, [&]<typename T>() -> Status {
      STRIDER_ASSIGN_OR_RETURN(map_, (make_map_kernel<T, bool, T, T>("Trilu", r.outputs[0], {mask, x, zero}, Select{})));
      return Status::ok();
    });
  }
  Status run(const QueueContext& context) override { return map_->run(context); }
  std::string implementation() const override { return "strider:Trilu"; }

 private:
  Tensor mask_;
  uint64_t zero_ = 0;  // zero bits are 0 in every dtype
  std::unique_ptr<Allocation> mask_memory_, zero_memory_;
  KernelPtr map_;
};

Result<KernelPtr> make_trilu(const KernelRequest& r) {
  STRIDER_ASSIGN_OR_RETURN(TriluParams p, resolve_trilu(NodeInputs(r.graph, r.node)));
  const Shape& sizes = r.inputs[0].sizes;
  auto kernel = std::make_unique<TriluKernel>(trilu_mask(p, sizes[sizes.size() - 2], sizes.back()));
  STRIDER_RETURN_IF_ERROR(kernel->init(r));
  return KernelPtr(std::move(kernel));
}

}  // namespace

void register_elementwise_kernels(std::vector<KernelEntry>& table) {
#define STRIDER_TABLE_KERNEL(name, kind, kernel, params) \
  if (ElementwiseKernel::kernel == ElementwiseKernel::kMap) table.push_back({#name, make_table_kernel<ElementwiseOp::k##name>});
  STRIDER_ELEMENTWISE_OPS(STRIDER_TABLE_KERNEL)
#undef STRIDER_TABLE_KERNEL
  table.push_back({"Where", make_where});
  table.push_back({"Trilu", make_trilu});
  table.push_back({"Clip", make_clip});
  table.push_back({"Pow", make_pow});
  table.push_back({"BatchNormalization", make_batch_norm});
  table.push_back({"Sum", [](const KernelRequest& r) { return make_variadic(r, elementwise::Add{}, false); }});
  table.push_back({"Mean", [](const KernelRequest& r) { return make_variadic(r, elementwise::Add{}, true); }});
  table.push_back({"Min", [](const KernelRequest& r) { return make_variadic(r, elementwise::Min{}, false); }});
  table.push_back({"Max", [](const KernelRequest& r) { return make_variadic(r, elementwise::Max{}, false); }});
}

}  // namespace strider::cpu
