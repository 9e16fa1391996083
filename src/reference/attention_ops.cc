// Attention (opset 23, and opset 24's nonpad_kv_seqlen) written from the ONNX spec, one
// query row at a time in float64: the oracle for the expansion every device runs
// (passes/expand_functions.h). A row whose keys are all masked has zero probabilities.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <limits>

#include "reference/op_support.h"

namespace strider::ref {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Q, K, V (and the past) as [B, H, S, D] element accessors, whichever layout they came in.
struct Heads {
  const RefTensor* t = nullptr;
  bool three_d = false;
  int64_t heads = 0, len = 0, size = 0;
  double at(int64_t b, int64_t h, int64_t s, int64_t d) const {
    int64_t i = three_d ? ((b * len + s) * heads + h) * size + d : ((b * heads + h) * len + s) * size + d;
    return t->floats[size_t(i)];
  }
};

Result<Heads> heads_of(const RefTensor* t, bool three_d, int64_t heads, const char* what) {
  if (t->rank() != (three_d ? 3 : 4)) return invalid_model(fmt::format("{} must have rank {}", what, three_d ? 3 : 4));
  Heads h{t, three_d, three_d ? heads : t->shape[1], three_d ? t->shape[1] : t->shape[2], 0};
  if (h.heads < 1 || (three_d && t->shape[2] % h.heads)) return invalid_model(fmt::format("{} does not split into heads", what));
  h.size = three_d ? t->shape[2] / h.heads : t->shape[3];
  return h;
}

// The mask's value at (b, h, i, j), broadcast from the right; j past its last dim is masked.
double mask_at(const RefTensor& m, int64_t b, int64_t h, int64_t i, int64_t j) {
  const int64_t index[4] = {b, h, i, j};
  const size_t rank = m.shape.size();
  if (j >= m.shape.back()) return -kInf;
  int64_t flat = 0;
  for (size_t d = 0; d < rank; ++d) {
    const int64_t size = m.shape[d];
    flat = flat * size + (size == 1 ? 0 : index[4 - rank + d]);
  }
  if (m.dtype == DType::kBool) return m.ints[size_t(flat)] ? 0.0 : -kInf;
  return m.floats[size_t(flat)];
}

struct Config {
  double scale = 0, softcap = 0;
  int64_t mode = 0, past = 0;
  bool causal = false;
  const RefTensor *mask = nullptr, *nonpad = nullptr;
};

// The biased scores of query row (b, h, i) over `total` keys and the same before the bias.
void row_scores(const Heads& q, const Heads& k, const Heads* past_k, const Config& c, int64_t b, int64_t h, int64_t i,
                int64_t kh, std::vector<double>& raw, std::vector<double>& biased) {
  const int64_t total = c.past + k.len;
  for (int64_t j = 0; j < total; ++j) {
    double dot = 0;
    for (int64_t d = 0; d < q.size; ++d)
      dot += q.at(b, h, i, d) * (j < c.past ? past_k->at(b, kh, j, d) : k.at(b, kh, j - c.past, d));
    double s = dot * c.scale;
    if (c.softcap > 0) s = c.softcap * std::tanh(s / c.softcap);
    raw[size_t(j)] = s;
    double bias = c.mask ? mask_at(*c.mask, b, h, i, j) : 0.0;
    if (c.nonpad) {
      const int64_t valid = c.nonpad->ints[size_t(b)];
      if (j >= valid) bias = -kInf;
      if (c.causal && c.past == 0 && j > i + valid - q.len) bias = -kInf;
    }
    if (c.causal && (c.past > 0 || !c.nonpad) && j > c.past + i) bias = -kInf;
    biased[size_t(j)] = s + bias;
  }
}

void softmax_row(std::vector<double>& x) {
  double top = -kInf, sum = 0;
  for (double v : x) top = std::max(top, v);
  if (top == -kInf) return std::fill(x.begin(), x.end(), 0.0);  // every key masked
  for (double& v : x) sum += (v = std::exp(v - top));
  for (double& v : x) v /= sum;
}

Result<OpOutputs> attention_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* qt, ctx.input(0, "Q"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* kt, ctx.input(1, "K"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* vt, ctx.input(2, "V"));
  for (const RefTensor* t : {qt, kt, vt}) STRIDER_RETURN_IF_ERROR(require_floating(*t, "Q, K and V"));
  const bool three_d = qt->rank() == 3;
  const AttributeMap& a = ctx.attributes();
  STRIDER_ASSIGN_OR_RETURN(int64_t q_heads, a.get_int("q_num_heads", 0));
  STRIDER_ASSIGN_OR_RETURN(int64_t kv_heads, a.get_int("kv_num_heads", 0));
  STRIDER_ASSIGN_OR_RETURN(Heads q, heads_of(qt, three_d, q_heads, "Q"));
  STRIDER_ASSIGN_OR_RETURN(Heads k, heads_of(kt, three_d, kv_heads, "K"));
  STRIDER_ASSIGN_OR_RETURN(Heads v, heads_of(vt, three_d, kv_heads, "V"));
  const RefTensor *past_kt = ctx.optional_input(4), *past_vt = ctx.optional_input(5);
  if (k.heads != v.heads || k.len != v.len || k.size != q.size || q.heads % k.heads || (!past_kt != !past_vt))
    return invalid_model("Q, K, V and the past do not fit together");
  Config c;
  STRIDER_ASSIGN_OR_RETURN(int64_t causal, a.get_int("is_causal", 0));
  STRIDER_ASSIGN_OR_RETURN(double scale, a.get_float("scale", float(1.0 / std::sqrt(double(q.size)))));
  STRIDER_ASSIGN_OR_RETURN(double softcap, a.get_float("softcap", 0.0f));
  STRIDER_ASSIGN_OR_RETURN(c.mode, a.get_int("qk_matmul_output_mode", 0));
  c.causal = causal != 0;
  c.scale = scale;
  c.softcap = softcap;
  c.mask = ctx.optional_input(3);
  c.nonpad = ctx.optional_input(6);
  Heads past_k, past_v;
  if (past_kt) {
    past_k = {past_kt, false, k.heads, past_kt->shape[2], k.size};
    past_v = {past_vt, false, k.heads, past_vt->shape[2], v.size};
    c.past = past_kt->shape[2];
  }
  const int64_t batch = qt->shape[0], total = c.past + k.len, group = q.heads / k.heads;
  Shape y_shape = three_d ? Shape{batch, q.len, q.heads * v.size} : Shape{batch, q.heads, q.len, v.size};
  RefTensor y = RefTensor::zeros(qt->dtype, y_shape);
  RefTensor present_k = RefTensor::zeros(qt->dtype, {batch, k.heads, total, k.size});
  RefTensor present_v = RefTensor::zeros(qt->dtype, {batch, k.heads, total, v.size});
  RefTensor qk_out = RefTensor::zeros(qt->dtype, {batch, q.heads, q.len, total});
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < k.heads; ++h)
      for (int64_t j = 0; j < total; ++j) {
        for (int64_t d = 0; d < k.size; ++d)
          present_k.floats[size_t(((b * k.heads + h) * total + j) * k.size + d)] =
              j < c.past ? past_k.at(b, h, j, d) : k.at(b, h, j - c.past, d);
        for (int64_t d = 0; d < v.size; ++d)
          present_v.floats[size_t(((b * k.heads + h) * total + j) * v.size + d)] =
              j < c.past ? past_v.at(b, h, j, d) : v.at(b, h, j - c.past, d);
      }
  std::vector<double> raw(static_cast<size_t>(total)), probs(static_cast<size_t>(total));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < q.heads; ++h)
      for (int64_t i = 0; i < q.len; ++i) {
        const int64_t kh = h / group;
        row_scores(q, k, past_kt ? &past_k : nullptr, c, b, h, i, kh, raw, probs);
        double* qk_row = qk_out.floats.data() + ((b * q.heads + h) * q.len + i) * total;  // total may be 0
        if (c.mode == 2) std::copy(probs.begin(), probs.end(), qk_row);
        else if (c.mode != 3) std::copy(raw.begin(), raw.end(), qk_row);
        softmax_row(probs);
        if (c.mode == 3) std::copy(probs.begin(), probs.end(), qk_row);
        for (int64_t d = 0; d < v.size; ++d) {
          double sum = 0;
          for (int64_t j = 0; j < total; ++j)
            sum += probs[size_t(j)] * present_v.floats[size_t(((b * k.heads + kh) * total + j) * v.size + d)];
          int64_t at = three_d ? (b * q.len + i) * q.heads * v.size + h * v.size + d : ((b * q.heads + h) * q.len + i) * v.size + d;
          y.floats[size_t(at)] = sum;
        }
      }
  return OpOutputs{std::move(y), std::move(present_k), std::move(present_v), std::move(qk_out)};
}

// RotaryEmbedding: per head, the first R elements (x1, x2) = halves or (even, odd) become
// (cos x1 - sin x2, sin x1 + cos x2), cos and sin at the token's position.
Result<OpOutputs> rotary_embedding_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* xt, ctx.input(0, "X"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* cos, ctx.input(1, "cos_cache"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* sin, ctx.input(2, "sin_cache"));
  const RefTensor* positions = ctx.optional_input(3);
  STRIDER_RETURN_IF_ERROR(require_floating(*xt, "input 0 (X)"));
  STRIDER_RETURN_IF_ERROR(require_floating(*cos, "input 1 (cos_cache)"));
  STRIDER_RETURN_IF_ERROR(require_floating(*sin, "input 2 (sin_cache)"));
  STRIDER_ASSIGN_OR_RETURN(int64_t interleaved, ctx.attributes().get_int("interleaved", 0));
  STRIDER_ASSIGN_OR_RETURN(int64_t num_heads, ctx.attributes().get_int("num_heads", 0));
  STRIDER_ASSIGN_OR_RETURN(int64_t rotary, ctx.attributes().get_int("rotary_embedding_dim", 0));
  const bool three_d = xt->rank() == 3;
  STRIDER_ASSIGN_OR_RETURN(Heads x, heads_of(xt, three_d, num_heads, "X"));
  if (rotary == 0) rotary = x.size;
  const int64_t half = rotary / 2, batch = xt->shape[0];
  if (rotary % 2 || rotary > x.size || cos->shape != sin->shape || cos->shape.back() != half)
    return invalid_model("rotary_embedding_dim and the caches do not fit the heads");
  if (positions ? (positions->shape != Shape{batch, x.len} || cos->rank() != 2) : (cos->shape != Shape{batch, x.len, half}))
    return invalid_model("the caches and position_ids do not fit X");
  RefTensor y = *xt;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t s = 0; s < x.len; ++s) {
      int64_t row = b * x.len + s;
      if (positions) {
        row = positions->ints[size_t(b * x.len + s)];
        if (row < 0 || row >= cos->shape[0]) return out_of_range(fmt::format("position {} outside the caches", row));
      }
      for (int64_t h = 0; h < x.heads; ++h)
        for (int64_t i = 0; i < half; ++i) {
          const double c = cos->floats[size_t(row * half + i)], sn = sin->floats[size_t(row * half + i)];
          const int64_t d1 = interleaved ? 2 * i : i, d2 = interleaved ? 2 * i + 1 : i + half;
          const double x1 = x.at(b, h, s, d1), x2 = x.at(b, h, s, d2);
          auto at = [&](int64_t d) {
            return size_t(three_d ? ((b * x.len + s) * x.heads + h) * x.size + d : ((b * x.heads + h) * x.len + s) * x.size + d);
          };
          y.floats[at(d1)] = c * x1 - sn * x2;
          y.floats[at(d2)] = sn * x1 + c * x2;
        }
    }
  return OpOutputs{std::move(y)};
}

// Einsum by definition: for every assignment of the letters, the product of the addressed
// input elements is added to the output element; "..." is the dims the letters leave.
Result<OpOutputs> einsum_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(std::string equation, ctx.attributes().get_string("equation", ""));
  std::string spec;
  for (char c : equation)
    if (c != ' ') spec += c;
  const size_t arrow = spec.find("->");
  std::vector<std::string> terms;
  std::string lhs = spec.substr(0, arrow) + ",";
  for (size_t at; (at = lhs.find(',')) != std::string::npos; lhs = lhs.substr(at + 1)) terms.push_back(lhs.substr(0, at));
  if (terms.size() != ctx.num_inputs()) return invalid_model("Einsum's terms and inputs differ in number");
  std::vector<const RefTensor*> in;
  int64_t broadcast_rank = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    STRIDER_ASSIGN_OR_RETURN(const RefTensor* t, ctx.input(i, "Inputs"));
    in.push_back(t);
    size_t dots = terms[i].find("...");
    int64_t named = int64_t(terms[i].size()) - (dots == std::string::npos ? 0 : 3);
    if (named > t->rank() || (dots == std::string::npos && named != t->rank())) return invalid_model("an Einsum term does not fit");
    std::string dims;
    for (int64_t e = t->rank() - named; e > 0; --e) dims += char('0' + (e - 1));
    broadcast_rank = std::max(broadcast_rank, t->rank() - named);
    if (dots != std::string::npos) terms[i] = terms[i].substr(0, dots) + dims + terms[i].substr(dots + 3);
  }
  std::string ellipsis;
  for (int64_t e = broadcast_rank; e > 0; --e) ellipsis += char('0' + (e - 1));
  std::string out;
  if (arrow != std::string::npos) {
    out = spec.substr(arrow + 2);
    if (size_t dots = out.find("..."); dots != std::string::npos) out = out.substr(0, dots) + ellipsis + out.substr(dots + 3);
  } else {
    out = ellipsis;
    for (char c = 'A'; c <= 'z'; ++c) {
      int n = 0;
      for (const std::string& t : terms) n += int(std::count(t.begin(), t.end(), c));
      if (n == 1 && std::isalpha(static_cast<unsigned char>(c))) out += c;
    }
  }
  std::string letters = out;
  std::map<char, int64_t> size;
  for (size_t i = 0; i < terms.size(); ++i)
    for (size_t d = 0; d < terms[i].size(); ++d) {
      if (letters.find(terms[i][d]) == std::string::npos) letters += terms[i][d];
      size[terms[i][d]] = std::max(size[terms[i][d]], in[i]->shape[d]);
    }
  Shape out_shape, all_shape;
  for (char c : out) out_shape.push_back(size.at(c));
  for (char c : letters) all_shape.push_back(size[c]);
  STRIDER_RETURN_IF_ERROR(checked_element_count(all_shape, "Einsum's index space").status());
  RefTensor y = RefTensor::zeros(in[0]->dtype, out_shape);
  // Integer Einsum wraps as the integer kernels do: products and sums modulo 2^64, then
  // wrapped to the dtype (through double, a product past 2^63 was undefined to convert).
  const bool floating = y.is_floating();
  for_each_index(all_shape, [&](int64_t, const std::vector<int64_t>& index) {
    double term = 1;
    uint64_t int_term = 1;
    for (size_t i = 0; i < terms.size(); ++i) {
      int64_t flat = 0;
      for (size_t d = 0; d < terms[i].size(); ++d) {
        const int64_t dim = in[i]->shape[d];
        flat = flat * dim + (dim == 1 ? 0 : index[letters.find(terms[i][d])]);
      }
      if (floating) term *= in[i]->element_as_double(flat);
      else int_term *= uint64_t(in[i]->element_as_int(flat));
    }
    int64_t o = 0;
    for (size_t d = 0; d < out.size(); ++d) o = o * out_shape[d] + index[d];
    if (floating) y.floats[size_t(o)] += term;
    else y.ints[size_t(o)] = wrap_to_dtype(int64_t(uint64_t(y.ints[size_t(o)]) + int_term), y.dtype);
  });
  return OpOutputs{std::move(y)};
}

constexpr OpDefinition kAttentionOps[] = {
    {"Einsum", 12, 27, einsum_op},
    {"Attention", 23, 27, attention_op},
    {"RotaryEmbedding", 23, 27, rotary_embedding_op},
};

}  // namespace

std::span<const OpDefinition> attention_op_definitions() { return kAttentionOps; }

}  // namespace strider::ref
