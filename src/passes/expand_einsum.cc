// Einsum as primitive ops. Two operands contract through one MatMul: each is summed over
// the letters only it has (and the output lacks), transposed to [batch, free, contracted]
// (or [batch, contracted, free]) and reshaped so that the free and contracted letters are
// one dim each; the product is reshaped back and transposed into the output's order. One or
// three and more operands are broadcast into one space of every letter, multiplied and
// summed over the letters the output lacks. "..." stands for the dims the letters leave,
// aligned from the right as broadcasting aligns them. A letter twice in one term first
// takes the diagonal: the term times an identity over the two dims, summed over the second.
#include <algorithm>
#include <cctype>
#include <map>

#include "ops/function_ops.h"
#include "passes/body_writer.h"

namespace strider::expansion {
namespace {

// An operand as the body transforms it: the values the body writes have no shape until
// the session infers them again, so each term carries its own.
struct Term {
  std::string letters;  // ellipsis dims as '0', '1', ...
  ValueId value = kNoValue;
  Shape shape;          // one size per letter (1 where the operand broadcasts)
};

bool has(const std::string& s, char c) { return s.find(c) != std::string::npos; }

// ReduceSum over `axes`, the axes an attribute before opset 13.
Result<ValueId> sum_axes(BodyWriter& w, int opset, ValueId x, const std::vector<int64_t>& axes) {
  AttributeMap keep = int_attr("keepdims", 0);
  if (opset < 13) {
    keep.set_ints("axes", axes);
    return w.op("ReduceSum", {x}, keep);
  }
  STRIDER_ASSIGN_OR_RETURN(ValueId a, w.ints(axes));
  return w.op("ReduceSum", {x, a}, keep);
}

// Sums `t` over its letters not in `keep` (removing them from the term).
Status sum_out(BodyWriter& w, int opset, Term& t, const std::string& keep) {
  std::vector<int64_t> axes;
  std::string kept;
  Shape kept_shape;
  for (size_t d = 0; d < t.letters.size(); ++d) {
    if (has(keep, t.letters[d])) {
      kept += t.letters[d];
      kept_shape.push_back(t.shape[d]);
    } else {
      axes.push_back(int64_t(d));
    }
  }
  if (axes.empty()) return Status::ok();
  STRIDER_ASSIGN_OR_RETURN(t.value, sum_axes(w, opset, t.value, axes));
  t.letters = kept;
  t.shape = kept_shape;
  return Status::ok();
}

// `t` transposed to the letter order `order` (a permutation of its letters).
Result<ValueId> arranged(BodyWriter& w, const Term& t, const std::string& order) {
  if (order == t.letters) return t.value;
  std::vector<int64_t> perm;
  for (char c : order) perm.push_back(int64_t(t.letters.find(c)));
  return w.op("Transpose", {t.value}, ints_attr("perm", perm));
}

std::string pick(const std::string& from, auto keep) {
  std::string out;
  for (char c : from)
    if (keep(c)) out += c;
  return out;
}

// Removes each repeated letter of `t`: its diagonal, as t * identity summed over the repeat.
Status take_diagonals(BodyWriter& w, int opset, DType dtype, Term& t) {
  for (size_t second = 1; second < t.letters.size(); ++second) {
    const size_t first = t.letters.find(t.letters[second]);
    if (first == second) continue;
    const int64_t n = t.shape[first];
    STRIDER_RETURN_IF_ERROR(w.reserve(n * n, dtype, "the diagonal's identity"));
    Shape eye_shape(t.letters.size(), 1);
    eye_shape[first] = eye_shape[second] = n;
    std::vector<float> eye(size_t(n * n), 0.0f);
    for (int64_t i = 0; i < n; ++i) eye[size_t(i * n + i)] = 1.0f;
    STRIDER_ASSIGN_OR_RETURN(ValueId identity, w.floats(dtype, eye_shape, eye));
    STRIDER_ASSIGN_OR_RETURN(ValueId masked, w.op("Mul", {t.value, identity}));
    STRIDER_ASSIGN_OR_RETURN(t.value, sum_axes(w, opset, masked, {int64_t(second)}));
    t.letters.erase(second, 1);
    t.shape.erase(t.shape.begin() + long(second));
    --second;
  }
  return Status::ok();
}

}  // namespace

Status expand_einsum(Graph& g, const Node& node, MemoryBudget* budget) {
  STRIDER_ASSIGN_OR_RETURN(EinsumParams p, resolve_einsum(NodeInputs(g, node)));
  std::vector<Term> terms;
  for (size_t i = 0; i < p.terms.size(); ++i) terms.push_back({p.terms[i], node.inputs[i], g.value(node.inputs[i]).shape});
  const DType dtype = g.value(node.inputs[0]).dtype;
  const std::string& out = p.output;
  std::map<char, int64_t>& size = p.sizes;
  BodyWriter w(g, node, budget);
  const int opset = node.opset;
  for (Term& t : terms) STRIDER_RETURN_IF_ERROR(take_diagonals(w, opset, dtype, t));
  auto sizes_of = [&](const std::string& letters) {
    Shape s;
    for (char c : letters) s.push_back(size[c]);
    return s;
  };
  ValueId result = kNoValue;
  std::string result_letters;
  if (terms.size() == 2) {
    Term &a = terms[0], &b = terms[1];
    STRIDER_RETURN_IF_ERROR(sum_out(w, opset, a, out + b.letters));
    STRIDER_RETURN_IF_ERROR(sum_out(w, opset, b, out + a.letters));
    const std::string batch = pick(out, [&](char c) { return has(a.letters, c) && has(b.letters, c); });
    const std::string left = pick(out, [&](char c) { return has(a.letters, c) && !has(b.letters, c); });
    const std::string right = pick(out, [&](char c) { return has(b.letters, c) && !has(a.letters, c); });
    const std::string contracted = pick(a.letters, [&](char c) { return has(b.letters, c) && !has(out, c); });
    auto own = [&](const Term& t, const std::string& letters) {  // the operand's own sizes (1 where it broadcasts)
      Shape s;
      for (char c : letters) s.push_back(t.shape[t.letters.find(c)]);
      return s;
    };
    Shape a_shape = own(a, batch), b_shape = own(b, batch);
    a_shape.push_back(num_elements(sizes_of(left)));
    a_shape.push_back(num_elements(sizes_of(contracted)));
    b_shape.push_back(num_elements(sizes_of(contracted)));
    b_shape.push_back(num_elements(sizes_of(right)));
    STRIDER_ASSIGN_OR_RETURN(ValueId at, arranged(w, a, batch + left + contracted));
    STRIDER_ASSIGN_OR_RETURN(ValueId bt, arranged(w, b, batch + contracted + right));
    STRIDER_ASSIGN_OR_RETURN(ValueId a_dims, w.ints(a_shape));
    STRIDER_ASSIGN_OR_RETURN(ValueId b_dims, w.ints(b_shape));
    STRIDER_ASSIGN_OR_RETURN(ValueId am, w.op("Reshape", {at, a_dims}));
    STRIDER_ASSIGN_OR_RETURN(ValueId bm, w.op("Reshape", {bt, b_dims}));
    STRIDER_ASSIGN_OR_RETURN(ValueId product, w.op("MatMul", {am, bm}));
    result_letters = batch + left + right;
    STRIDER_ASSIGN_OR_RETURN(ValueId shape, w.ints(sizes_of(result_letters)));
    STRIDER_ASSIGN_OR_RETURN(result, w.op("Reshape", {product, shape}));
  } else {
    std::string all = out;
    for (const Term& t : terms)
      for (char c : t.letters)
        if (!has(all, c)) all += c;
    for (Term& t : terms) {
      STRIDER_ASSIGN_OR_RETURN(ValueId v, arranged(w, t, pick(all, [&](char c) { return has(t.letters, c); })));
      Shape shape;
      for (char c : all) shape.push_back(has(t.letters, c) ? t.shape[t.letters.find(c)] : 1);
      STRIDER_ASSIGN_OR_RETURN(ValueId dims, w.ints(shape));
      STRIDER_ASSIGN_OR_RETURN(v, w.op("Reshape", {v, dims}));
      if (result == kNoValue) {
        result = v;
      } else {
        STRIDER_ASSIGN_OR_RETURN(result, w.op("Mul", {result, v}));
      }
    }
    result_letters = all;
    Term whole{all, result, sizes_of(all)};
    STRIDER_RETURN_IF_ERROR(sum_out(w, opset, whole, out));
    result = whole.value;
    result_letters = whole.letters;
  }
  Term final_term{result_letters, result, sizes_of(result_letters)};
  STRIDER_ASSIGN_OR_RETURN(ValueId ordered, arranged(w, final_term, out));
  return w.op("Identity", {ordered}, {}, node.outputs[0]).status();
}

}  // namespace strider::expansion
