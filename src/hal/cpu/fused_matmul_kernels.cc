// FusedMatMul on the CPU (ops/fused_elementwise.h): oneDNN's matmul with the epilogue as its
// post-ops when every instruction maps onto one, so the product is written once, already
// finished. What maps: a first Add of a row ([..., N]) as the matmul's bias; Add, Sub, Mul,
// Div of the running value with an operand as binary post-ops; one-input activations as
// eltwise post-ops (onednn_eltwise_of); GELU as exporters write it,
// x * (1 + erf(x / sqrt 2)) * 0.5 in either order of the last two products, as
// eltwise_gelu_erf. Anything else runs as the plain matmul, then the program as a fused
// elementwise pass over the output in place: never wrong, one more pass.
#include <cmath>
#include <optional>

#include "hal/cpu/cpu_kernels.h"
#include "hal/cpu/matmul.h"
#include "hal/matmul_views.h"
#include "ops/fused_elementwise.h"

namespace strider::cpu {
namespace {

using KernelPtr = std::unique_ptr<Kernel>;

// The epilogue as oneDNN's: an optional bias, then post-ops.
struct PostOpPlan {
  std::optional<TensorView> bias;
  std::vector<MatMulPostOp> ops;
};

// Reads the program against the node's operands: register k >= 1 is request input k + 1.
class EpilogueReader {
 public:
  EpilogueReader(const KernelRequest& r, const FusedProgram& p, const TensorView& out) : r_(r), p_(p), out_(out) {}

  std::optional<PostOpPlan> plan() {
    PostOpPlan plan;
    int value = 0;  // the register holding the running result
    for (size_t j = 0; j < p_.code.size();) {
      if (size_t used = gelu_at(j, value); used > 0) {
        plan.ops.push_back(MatMulPostOp{false, OneDnnEltwise{dnnl::algorithm::eltwise_gelu_erf}});
        j += used;
      } else if (!single(p_.code[j], j, value, &plan)) {
        return std::nullopt;
      } else {
        ++j;
      }
      value = p_.inputs + int(j) - 1;
    }
    return plan;
  }

 private:
  bool is_operand(int reg) const { return reg >= 1 && reg < p_.inputs; }
  const TensorView& view_of(int reg) const { return r_.inputs[size_t(reg) + 1]; }
  // The operand's view at the output's rank (leading unit dims), as oneDNN's binary wants.
  TensorView at_out_rank(int reg) const {
    TensorView v = view_of(reg);
    while (v.rank() < out_.rank()) v = insert_unit_dim(v, 0);
    return v;
  }
  std::optional<float> scalar(int reg) const {
    if (!is_operand(reg)) return std::nullopt;
    const Tensor* c = r_.constant_input(size_t(reg) + 1);
    if (!c || c->num_elements() != 1) return std::nullopt;
    return float(c->element_as_double(0));
  }
  // Within the rounding of the operand's dtype: a bf16 model's sqrt(2) is 1.4140625.
  bool scalar_is(int reg, double expected) const {
    std::optional<float> v = scalar(reg);
    if (!v) return false;
    const DType dtype = view_of(reg).dtype;
    const double rounding = dtype == DType::kBF16 ? 0x1p-8 : dtype == DType::kF16 ? 0x1p-11 : 1e-6;
    return std::abs(double(*v) - expected) <= rounding * std::abs(expected);
  }
  // `i` combines `value` with another register (either order when commutative): which.
  static std::optional<int> other_of(const FusedInstruction& i, int value, bool commutative) {
    if (i.a == value && i.b >= 0 && i.b != value) return i.b;
    if (commutative && i.b == value && i.a >= 0 && i.a != value) return i.a;
    return std::nullopt;
  }

  bool single(const FusedInstruction& i, size_t j, int value, PostOpPlan* plan) const {
    const bool commutative = i.op == FusedOp::kAdd || i.op == FusedOp::kMul;
    if (i.b < 0) {
      if (i.a != value) return false;
      std::optional<OneDnnEltwise> e = onednn_eltwise_of(FusedProgram{1, {{i.op, 0, -1, i.alpha, i.beta}}});
      if (!e) return false;
      plan->ops.push_back(MatMulPostOp{false, *e});
      return true;
    }
    std::optional<int> other = other_of(i, value, commutative);
    if (!other || !is_operand(*other)) return false;
    dnnl::algorithm binary;
    switch (i.op) {
      case FusedOp::kAdd: binary = dnnl::algorithm::binary_add; break;
      case FusedOp::kSub: binary = dnnl::algorithm::binary_sub; break;
      case FusedOp::kMul: binary = dnnl::algorithm::binary_mul; break;
      case FusedOp::kDiv: binary = dnnl::algorithm::binary_div; break;
      default: return false;
    }
    TensorView operand = at_out_rank(*other);
    bool row = true;
    for (int64_t d = 0; d + 1 < operand.rank(); ++d) row = row && operand.sizes[size_t(d)] == 1;
    if (j == 0 && i.op == FusedOp::kAdd && row && operand.sizes.back() == out_.sizes.back()) {
      plan->bias = operand;  // the Linear's bias: oneDNN's own bias argument
      return true;
    }
    plan->ops.push_back(MatMulPostOp{true, {}, binary, operand});
    return true;
  }

  // GELU over `value` at instruction j: u = value / sqrt2 (or * 1/sqrt2); e = Erf(u);
  // p = e + 1; then value * p * 0.5 or value * (p * 0.5). The number of instructions, or 0.
  size_t gelu_at(size_t j, int value) const {
    if (j + 5 > p_.code.size()) return 0;
    auto result = [&](size_t k) { return p_.inputs + int(j + k); };
    const FusedInstruction* c = &p_.code[j];
    const bool scaled = (c[0].op == FusedOp::kDiv && c[0].a == value && scalar_is(c[0].b, std::sqrt(2.0))) ||
                        (c[0].op == FusedOp::kMul && other_of(c[0], value, true) &&
                         scalar_is(*other_of(c[0], value, true), 1.0 / std::sqrt(2.0)));
    if (!scaled || c[1].op != FusedOp::kErf || c[1].a != result(0)) return 0;
    std::optional<int> one = other_of(c[2], result(1), true);
    if (c[2].op != FusedOp::kAdd || !one || !scalar_is(*one, 1.0)) return 0;
    if (c[3].op != FusedOp::kMul || c[4].op != FusedOp::kMul) return 0;
    std::optional<int> first = other_of(c[3], result(2), true);   // p * ...
    std::optional<int> last = other_of(c[4], result(3), true);    // (...) * ...
    if (first == value && last && scalar_is(*last, 0.5)) return 5;           // (value * p) * 0.5
    if (first && scalar_is(*first, 0.5) && last == value) return 5;         // value * (p * 0.5)
    return 0;
  }

  const KernelRequest& r_;
  const FusedProgram& p_;
  const TensorView& out_;
};

// The plain matmul, then the program over its output in place.
class MatMulThenProgram final : public Kernel {
 public:
  MatMulThenProgram(KernelPtr matmul, KernelPtr program) : matmul_(std::move(matmul)), program_(std::move(program)) {}
  Status run(const QueueContext& context) override {
    STRIDER_RETURN_IF_ERROR(matmul_->run(context));
    return program_->run(context);
  }
  std::string implementation() const override { return matmul_->implementation() + " then " + program_->implementation(); }

 private:
  KernelPtr matmul_, program_;
};

Result<KernelPtr> make_fused_matmul(const KernelRequest& r) {
  if (r.inputs.size() < 2) return invalid_model(fmt::format("node '{}': FusedMatMul needs A and B", r.node.name));
  STRIDER_ASSIGN_OR_RETURN(FusedProgram program, read_fused_program_of(r.node, int(r.inputs.size()) - 1));
  const TensorView& out = r.outputs[0];
  const MatMulViews views = align_matmul(r.inputs[0], r.inputs[1], out);
  const DType dtype = out.dtype;
  if (dtype == DType::kF32 || dtype == DType::kBF16) {
    if (std::optional<PostOpPlan> plan = EpilogueReader(r, program, out).plan()) {
      auto fused = make_matmul_of(views, plan->bias ? &*plan->bias : nullptr, 1.0f, r.node.name, plan->ops);
      if (fused.is_ok() || fused.status().code() != StatusCode::kUnsupported) return fused;
    }
  }
  STRIDER_ASSIGN_OR_RETURN(KernelPtr matmul, make_matmul_of(views, nullptr, 1.0f, r.node.name));
  std::vector<TensorView> operands{out};
  operands.insert(operands.end(), r.inputs.begin() + 2, r.inputs.end());
  STRIDER_ASSIGN_OR_RETURN(KernelPtr epilogue, make_fused_program_kernel(program, out, operands));
  return KernelPtr(new MatMulThenProgram(std::move(matmul), std::move(epilogue)));
}

}  // namespace

void register_fused_matmul_kernels(std::vector<KernelEntry>& table) {
  table.push_back({kFusedMatMulOp, make_fused_matmul});
}

}  // namespace strider::cpu
