// Internal to the reference interpreter: what an op evaluation sees, how ops are
// registered, and the element plumbing the op families share (broadcast and gather index
// maps, axis and dtype checks, numeric conversions). No op semantics live here.
//
// An op function returns one RefTensor per node output (omitted optional outputs may still
// be computed). Its errors carry no node name: the interpreter prefixes them with
// "node '<name>' (<op_type>): ".
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "ir/graph.h"
#include "reference/reference.h"
#include "strider/status.h"

namespace strider::ref {

class OpContext {
 public:
  // `inputs` has one entry per node input; nullptr marks an omitted optional input.
  OpContext(const Node& node, std::vector<const RefTensor*> inputs)
      : node_(node), inputs_(std::move(inputs)) {}

  const Node& node() const { return node_; }
  int opset() const { return node_.opset; }
  const AttributeMap& attributes() const { return node_.attributes; }

  size_t num_inputs() const { return inputs_.size(); }
  bool has_input(size_t i) const { return i < inputs_.size() && inputs_[i] != nullptr; }
  // The input at i; an INVALID_MODEL error naming it ("input 1 (W)") when absent.
  Result<const RefTensor*> input(size_t i, std::string_view name) const;
  // The input at i, or nullptr when absent or omitted.
  const RefTensor* optional_input(size_t i) const { return has_input(i) ? inputs_[i] : nullptr; }

  size_t num_outputs() const { return node_.outputs.size(); }
  bool has_output(size_t i) const {
    return i < node_.outputs.size() && node_.outputs[i] != kNoValue;
  }

 private:
  const Node& node_;
  std::vector<const RefTensor*> inputs_;
};

using OpOutputs = std::vector<RefTensor>;
using OpFunction = Result<OpOutputs> (*)(const OpContext&);

// One op of the default domain, implemented for the ai.onnx opsets
// [first_opset, last_opset]; the function switches on ctx.opset() where the spec changed.
struct OpDefinition {
  std::string_view op_type;
  int first_opset;
  int last_opset;
  OpFunction evaluate;
};

// The op families; each lists the ops it implements.
std::span<const OpDefinition> elementwise_op_definitions();
std::span<const OpDefinition> cast_compare_op_definitions();
std::span<const OpDefinition> tensor_op_definitions();
std::span<const OpDefinition> generator_op_definitions();
std::span<const OpDefinition> selection_op_definitions();
std::span<const OpDefinition> control_flow_op_definitions();
std::span<const OpDefinition> grid_op_definitions();

// Evaluates a graph attribute's body (If's branches, Loop's and Scan's body) on its formal
// inputs, its outer references bound by name: its outputs in order (interpreter.cc).
Result<std::vector<RefTensor>> evaluate_body(const Subgraph& body, std::vector<RefTensor> formals,
                                             const std::map<std::string, const RefTensor*>& outer);
std::span<const OpDefinition> linear_op_definitions();
std::span<const OpDefinition> normalization_op_definitions();
std::span<const OpDefinition> pool_op_definitions();
std::span<const OpDefinition> resize_op_definitions();
std::span<const OpDefinition> reduce_op_definitions();
std::span<const OpDefinition> activation_op_definitions();
std::span<const OpDefinition> norm_family_op_definitions();
std::span<const OpDefinition> pad_tile_op_definitions();
std::span<const OpDefinition> scatter_op_definitions();
std::span<const OpDefinition> attention_op_definitions();
std::span<const OpDefinition> loss_op_definitions();
std::span<const OpDefinition> rearrange_op_definitions();
std::span<const OpDefinition> quantize_op_definitions();
std::span<const OpDefinition> recurrent_op_definitions();

// ---- messages and checks --------------------------------------------------------------

// "f32[2, 3]"
std::string describe(const RefTensor& t);
// An error unless `t` has a floating dtype: "<what> is i64, expected a floating type".
Status require_floating(const RefTensor& t, std::string_view what);
// An error unless `t` has an integer dtype (not bool).
Status require_integer(const RefTensor& t, std::string_view what);
// A scale (floating) or zero point (integer) of a quantized operand, applied along an axis
// of `count` indices: absent (null), one value, or one per index; else an error naming `what`.
// The quantized ops index these by position, so an empty or mistyped one must stop here.
enum class QuantParam { kScale, kZeroPoint };
Status require_quant_param(const RefTensor* t, QuantParam kind, int64_t count, std::string_view what);
// An error unless a and b have the same dtype.
Status require_same_dtype(const RefTensor& a, const RefTensor& b, std::string_view what_a,
                          std::string_view what_b);
// `axis` in [-rank, rank) mapped to [0, rank), else an error naming `what`.
Result<int64_t> normalized_axis(int64_t axis, int64_t rank, std::string_view what);
// Normalizes each axis and rejects duplicates.
Result<std::vector<int64_t>> normalized_axes(std::span<const int64_t> axes, int64_t rank,
                                             std::string_view what);
// The values of an integer tensor (shape, axes, pads, ...), or an error naming `what`.
Result<std::vector<int64_t>> read_ints(const RefTensor& t, std::string_view what);
// The values of any numeric tensor as double.
std::vector<double> read_doubles(const RefTensor& t);
// The only element of a one-element tensor (a scalar or shape [1]).
Result<double> read_scalar_double(const RefTensor& t, std::string_view what);
Result<int64_t> read_scalar_int(const RefTensor& t, std::string_view what);

// ---- shapes and index maps ------------------------------------------------------------

// The most elements an output made from data (a shape input, scales, pads) may have: a
// larger one is refused as an error rather than allocated (2^32 doubles are 32 GiB).
inline constexpr int64_t kMaxElements = int64_t(1) << 32;
// The element count of `shape`, or an error naming `what` when a dim is negative or the
// count exceeds kMaxElements (overflow included).
// The product of shape[begin, end) (shapes are checked: it cannot overflow).
int64_t product(const Shape& shape, size_t begin, size_t end);
Result<int64_t> checked_element_count(const Shape& shape, std::string_view what);

// numpy broadcasting of a and b, or an error naming both shapes.
Result<Shape> broadcast_or_error(const Shape& a, const Shape& b);
// For each element of `out` (row-major), the flat index of the element of a tensor shaped
// `in` that numpy broadcasting maps to it; `in` must broadcast to `out`.
std::vector<int64_t> broadcast_source_index(const Shape& in, const Shape& out);
// A tensor shaped `shape` whose element i is source element source_index[i].
RefTensor gather_elements(const RefTensor& source, Shape shape,
                          const std::vector<int64_t>& source_index);
// Calls visit(flat_index, multi_index) for every element of `shape`, row-major.
template <typename Visit>
void for_each_index(const Shape& shape, Visit visit) {
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t flat = 0; flat < count; ++flat) {
    visit(flat, index);
    for (size_t axis = shape.size(); axis-- > 0;) {
      if (++index[axis] < shape[axis]) break;
      index[axis] = 0;
    }
  }
}

// ---- numbers --------------------------------------------------------------------------

// v wrapped to the width of an integer dtype (two's complement), or v != 0 for bool.
int64_t wrap_to_dtype(int64_t v, DType dtype);
// v rounded to the precision of a floating dtype (round to nearest even; f64 is exact).
double round_to_precision(double v, DType dtype);
// The smallest / largest value of an integer or bool dtype.
int64_t integer_lowest(DType dtype);
int64_t integer_highest(DType dtype);
// Truncation toward zero, saturating at the int64 range; NaN gives 0.
int64_t truncate_to_int(double v);
// v clamped to an integer dtype's range (a quantized value), NaN as 0 (as the runtime's
// Cast turns NaN into 0); v is expected to be rounded already.
int64_t saturate_to_dtype(double v, DType dtype);
// Converts element `i` of `from` to `to` (the Cast conversion) and stores it at `j` of `out`.
void convert_element(const RefTensor& from, int64_t i, RefTensor& out, int64_t j);
// The reference holds every integer as int64; a u64 as its bit pattern, so one above
// INT64_MAX is negative there. These give such values their unsigned meaning: order_key
// orders as the value does (the top bit flipped), and u64 division and remainder.
inline int64_t order_key(int64_t v, DType dtype) {
  return dtype == DType::kU64 ? int64_t(uint64_t(v) ^ (uint64_t(1) << 63)) : v;
}
inline int64_t min_of(int64_t a, int64_t b, DType dtype) { return order_key(b, dtype) < order_key(a, dtype) ? b : a; }
inline int64_t max_of(int64_t a, int64_t b, DType dtype) { return order_key(a, dtype) < order_key(b, dtype) ? b : a; }
inline int64_t unsigned_quotient(int64_t a, int64_t b) { return int64_t(uint64_t(a) / uint64_t(b)); }
inline int64_t unsigned_remainder(int64_t a, int64_t b) { return int64_t(uint64_t(a) % uint64_t(b)); }
// Wrapping int64 arithmetic (no signed-overflow UB).
inline int64_t wrapping_add(int64_t a, int64_t b) { return int64_t(uint64_t(a) + uint64_t(b)); }
inline int64_t wrapping_sub(int64_t a, int64_t b) { return int64_t(uint64_t(a) - uint64_t(b)); }
inline int64_t wrapping_mul(int64_t a, int64_t b) { return int64_t(uint64_t(a) * uint64_t(b)); }

}  // namespace strider::ref

namespace strider::ref {

// Elementwise binary evaluation with numpy broadcasting: a tensor of `out_dtype` shaped
// like the broadcast of a and b, where apply(ia, ib, io, out) writes output element io
// from elements ia of a and ib of b.
template <typename Apply>
Result<RefTensor> broadcast_binary(const RefTensor& a, const RefTensor& b, DType out_dtype,
                                   Apply apply) {
  STRIDER_ASSIGN_OR_RETURN(Shape shape, broadcast_or_error(a.shape, b.shape));
  std::vector<int64_t> from_a = broadcast_source_index(a.shape, shape);
  std::vector<int64_t> from_b = broadcast_source_index(b.shape, shape);
  RefTensor out = RefTensor::zeros(out_dtype, shape);
  for (size_t i = 0; i < from_a.size(); ++i) apply(size_t(from_a[i]), size_t(from_b[i]), i, out);
  return out;
}

// An error unless `t` is not bool.
inline Status require_numeric(const RefTensor& t, std::string_view what) {
  if (t.dtype != DType::kBool) return Status::ok();
  return invalid_model(fmt::format("{} is bool, expected a numeric type", what));
}

// y = f(x) for a floating x.
template <typename F>
Result<OpOutputs> unary_floating(const OpContext& ctx, F f) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "X"));
  STRIDER_RETURN_IF_ERROR(require_floating(*x, "input 0 (X)"));
  RefTensor y = *x;
  for (double& v : y.floats) v = f(v);
  return OpOutputs{std::move(y)};
}

// y = f(x) for a floating x, g(x) (wrapped to the dtype) for an integer x.
template <typename F, typename G>
Result<OpOutputs> unary_numeric(const OpContext& ctx, F f, G g) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "X"));
  STRIDER_RETURN_IF_ERROR(require_numeric(*x, "input 0 (X)"));
  RefTensor y = *x;
  for (double& v : y.floats) v = f(v);
  for (int64_t& v : y.ints) v = wrap_to_dtype(g(v), y.dtype);
  return OpOutputs{std::move(y)};
}

}  // namespace strider::ref
