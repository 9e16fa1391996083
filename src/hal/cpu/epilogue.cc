#include "hal/cpu/epilogue.h"

#include <cmath>

#include "hal/matmul_views.h"

namespace strider::cpu {
namespace {

// Reads the program as a tree over the node's operands (register k >= 1 is request input
// k + offset) and peels it from the result inward: each layer is a post-op over the layer
// below, down to register 0, the primitive's result.
class EpilogueReader {
 public:
  EpilogueReader(const KernelRequest& r, const FusedProgram& p, const TensorView& out, size_t offset, bool bias)
      : r_(r), p_(p), out_(out), offset_(offset), allow_bias_(bias) {}

  std::optional<PostOpPlan> plan() {
    PostOpPlan plan;
    if (!peel(p_.inputs + int(p_.code.size()) - 1, &plan)) return std::nullopt;
    return plan;
  }

 private:
  const FusedInstruction* at(int reg) const { return reg >= p_.inputs ? &p_.code[size_t(reg - p_.inputs)] : nullptr; }
  bool is_op(int reg, FusedOp op) const { return at(reg) && at(reg)->op == op; }
  bool is_operand(int reg) const { return reg >= 1 && reg < p_.inputs; }
  const TensorView& view_of(int reg) const { return r_.inputs[size_t(reg) + offset_]; }
  // The operand's view at the output's rank (leading unit dims), as oneDNN's binary wants.
  TensorView at_out_rank(int reg) const {
    TensorView v = view_of(reg);
    while (v.rank() < out_.rank()) v = insert_unit_dim(v, 0);
    return v;
  }
  // Whether `reg` is a constant scalar operand equal to `expected` within the rounding of
  // its dtype (a bf16 model's sqrt(2) is 1.4140625).
  bool is_constant(int reg, double expected) const {
    if (!is_operand(reg)) return false;
    const Tensor* c = r_.constant_input(size_t(reg) + offset_);
    if (!c || c->num_elements() != 1) return false;
    const DType dtype = view_of(reg).dtype;
    const double rounding = dtype == DType::kBF16 ? 0x1p-8 : dtype == DType::kF16 ? 0x1p-11 : 1e-6;
    return std::abs(c->element_as_double(0) - expected) <= rounding * std::abs(expected);
  }
  // oneDNN 2.6's binary post-op read a strided operand (a channel slice of a channels-last
  // concat) wrongly (seed 1861 of the random-graph test): operands must be packed, and one of
  // the output's full shape must also have the output's strides.
  bool binary_operand_ok(const TensorView& v) const {
    if (!is_packed(v)) return false;
    if (v.sizes != out_.sizes) return true;
    for (size_t d = 0; d < v.sizes.size(); ++d)
      if (v.sizes[d] > 1 && v.strides[d] != out_.strides[d]) return false;
    return true;
  }
  // Structural equality of two registers' expressions (commutative ops either way round).
  bool same(int x, int y) const {
    if (x == y) return true;
    const FusedInstruction *a = at(x), *b = at(y);
    if (!a || !b || a->op != b->op || a->alpha != b->alpha || a->beta != b->beta) return false;
    if (same(a->a, b->a) && (a->b < 0 ? b->b < 0 : b->b >= 0 && same(a->b, b->b))) return true;
    const bool commutative = a->op == FusedOp::kAdd || a->op == FusedOp::kMul;
    return commutative && a->b >= 0 && b->b >= 0 && same(a->a, b->b) && same(a->b, b->a);
  }
  // The leaves of a product: `reg` with nested Muls flattened.
  void factors(int reg, std::vector<int>* out) const {
    if (is_op(reg, FusedOp::kMul)) {
      factors(at(reg)->a, out);
      factors(at(reg)->b, out);
    } else {
      out->push_back(reg);
    }
  }
  // Removes one leaf equal to `reg` (structurally) from `leaves`; false if none is.
  bool take(std::vector<int>& leaves, int reg) const {
    for (size_t k = 0; k < leaves.size(); ++k)
      if (same(leaves[k], reg)) {
        leaves.erase(leaves.begin() + long(k));
        return true;
      }
    return false;
  }
  bool take_constant(std::vector<int>& leaves, double value) const {
    for (size_t k = 0; k < leaves.size(); ++k)
      if (is_constant(leaves[k], value)) {
        leaves.erase(leaves.begin() + long(k));
        return true;
      }
    return false;
  }
  // Add(f(...), 1) or Add(1, f(...)) with f == op: the register f is applied to, else -1.
  int one_plus(int reg, FusedOp op) const {
    const FusedInstruction* add = at(reg);
    if (!add || add->op != FusedOp::kAdd) return -1;
    for (auto [f, one] : {std::pair{add->a, add->b}, std::pair{add->b, add->a}})
      if (is_op(f, op) && is_constant(one, 1.0)) return at(f)->a;
    return -1;
  }

  // GELU(t) with erf: the product of t, 0.5 and 1 + erf(t / sqrt 2) (or erf(t * 1/sqrt 2)),
  // grouped in any way. t's register, or -1.
  int gelu_erf_of(int reg) const {
    std::vector<int> leaves;
    factors(reg, &leaves);
    for (int leaf : leaves) {
      const int d = one_plus(leaf, FusedOp::kErf);
      if (d < 0) continue;
      int t = -1;
      if (is_op(d, FusedOp::kDiv) && is_constant(at(d)->b, std::sqrt(2.0))) t = at(d)->a;
      std::vector<int> scaled;
      factors(d, &scaled);
      if (t < 0 && scaled.size() == 2 && take_constant(scaled, 1.0 / std::sqrt(2.0))) t = scaled[0];
      if (t < 0) continue;
      std::vector<int> rest = leaves;
      take(rest, leaf);
      if (take(rest, t) && take_constant(rest, 0.5) && rest.empty()) return t;
    }
    return -1;
  }
  // GELU(t), tanh form: 0.5 * t * (1 + tanh(sqrt(2/pi) * (t + 0.044715 * t^3))), t^3 as
  // products of t, any grouping. t's register, or -1.
  int gelu_tanh_of(int reg) const {
    std::vector<int> leaves;
    factors(reg, &leaves);
    for (int leaf : leaves) {
      const int inner = one_plus(leaf, FusedOp::kTanh);
      if (inner < 0) continue;
      std::vector<int> scaled;
      factors(inner, &scaled);
      if (scaled.size() != 2 || !take_constant(scaled, std::sqrt(2.0 / M_PI)) || !is_op(scaled[0], FusedOp::kAdd)) continue;
      const FusedInstruction* sum = at(scaled[0]);
      for (auto [t, cubic] : {std::pair{sum->a, sum->b}, std::pair{sum->b, sum->a}}) {
        std::vector<int> c;
        factors(cubic, &c);
        if (c.size() != 4 || !take_constant(c, 0.044715) || !take(c, t) || !take(c, t) || !take(c, t)) continue;
        std::vector<int> rest = leaves;
        take(rest, leaf);
        if (take(rest, t) && take_constant(rest, 0.5) && rest.empty()) return t;
      }
    }
    return -1;
  }
  // SiLU(t) = t * Sigmoid(t): t's register, or -1.
  int silu_of(int reg) const {
    const FusedInstruction* m = at(reg);
    if (!m || m->op != FusedOp::kMul) return -1;
    for (auto [t, s] : {std::pair{m->a, m->b}, std::pair{m->b, m->a}})
      if (is_op(s, FusedOp::kSigmoid) && same(at(s)->a, t)) return t;
    return -1;
  }

  bool eltwise(int inner, dnnl::algorithm algorithm, PostOpPlan* plan) const {
    if (!peel(inner, plan)) return false;
    plan->ops.push_back(OneDnnPostOp{false, OneDnnEltwise{algorithm, algorithm == dnnl::algorithm::eltwise_swish ? 1.0f : 0.0f}});
    return true;
  }

  // Appends to `plan` the post-ops that compute `reg` from register 0; false if they cannot.
  bool peel(int reg, PostOpPlan* plan) const {
    if (reg == 0) return true;
    const FusedInstruction* i = at(reg);
    if (!i) return false;
    if (int t = gelu_erf_of(reg); t >= 0) return eltwise(t, dnnl::algorithm::eltwise_gelu_erf, plan);
    if (int t = gelu_tanh_of(reg); t >= 0) return eltwise(t, dnnl::algorithm::eltwise_gelu_tanh, plan);
    if (int t = silu_of(reg); t >= 0) return eltwise(t, dnnl::algorithm::eltwise_swish, plan);
    if (i->b < 0) {
      std::optional<OneDnnEltwise> e = onednn_eltwise_of(FusedProgram{1, {{i->op, 0, -1, i->alpha, i->beta}}});
      if (!e || !peel(i->a, plan)) return false;
      plan->ops.push_back(OneDnnPostOp{false, *e});
      return true;
    }
    const bool commutative = i->op == FusedOp::kAdd || i->op == FusedOp::kMul;
    int inner = i->a, operand = i->b;
    if (!is_operand(operand) && commutative) std::swap(inner, operand);
    if (!is_operand(operand)) return false;
    dnnl::algorithm binary;
    switch (i->op) {
      case FusedOp::kAdd: binary = dnnl::algorithm::binary_add; break;
      case FusedOp::kSub: binary = dnnl::algorithm::binary_sub; break;
      case FusedOp::kMul: binary = dnnl::algorithm::binary_mul; break;
      case FusedOp::kDiv: binary = dnnl::algorithm::binary_div; break;
      default: return false;
    }
    TensorView view = at_out_rank(operand);
    if (!binary_operand_ok(view)) return false;
    if (!peel(inner, plan)) return false;
    bool row = view.sizes.back() == out_.sizes.back();
    for (int64_t d = 0; d + 1 < view.rank(); ++d) row = row && view.sizes[size_t(d)] == 1;
    if (allow_bias_ && inner == 0 && i->op == FusedOp::kAdd && row) {
      plan->bias = view;  // the Linear's bias: oneDNN's own bias argument
      return true;
    }
    plan->ops.push_back(OneDnnPostOp{true, {}, binary, view});
    return true;
  }

  const KernelRequest& r_;
  const FusedProgram& p_;
  const TensorView& out_;
  size_t offset_;
  bool allow_bias_;
};

}  // namespace

std::optional<PostOpPlan> plan_post_ops(const KernelRequest& request, const FusedProgram& program,
                                        const TensorView& out, size_t operand_offset, bool allow_bias) {
  for (size_t k = 1; k < size_t(program.inputs); ++k)
    if (k + operand_offset >= request.inputs.size()) return std::nullopt;
  return EpilogueReader(request, program, out, operand_offset, allow_bias).plan();
}

}  // namespace strider::cpu
