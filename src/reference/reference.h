// The float64 reference interpreter: the oracle that `strider check`, the tests and the
// benchmarks compare the real runtime against.
//
// It is deliberately naive and independent of the runtime: dense row-major tensors, one node
// at a time in graph order, no planner, no views, no shape inference from src/ops and no
// kernel code shared with any backend. Each node's output shape is computed here from the
// actual input values and the node's attributes, following the ONNX operator spec of the
// node's opset.
//
// Numerics: floating values (f32, f16, bf16, f64) are held and computed in double, whatever
// their declared dtype; they are rounded to the declared precision only by Cast (whose result
// is defined by its rounding) and when written out with ref_to_tensor. Integer and bool values
// are held exactly as int64 and wrap to the width of their dtype after every arithmetic op,
// as the two's complement arithmetic of a real kernel does.
//
// Thread-safety: evaluate_reference is a pure function of its arguments; calls may run
// concurrently on different (or the same, unmodified) graphs.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "strider/status.h"
#include "strider/tensor.h"

namespace strider {

// A reference value. `dtype` is the ONNX-declared element type. Exactly one of the two
// vectors holds the elements (row-major): `floats` for a floating dtype, `ints` otherwise
// (bool as 0 / 1).
struct RefTensor {
  DType dtype = DType::kF32;
  Shape shape;
  std::vector<double> floats;
  std::vector<int64_t> ints;

  // A zero-filled tensor; its element vector is sized from `shape`.
  static RefTensor zeros(DType dtype, Shape shape);

  bool is_floating() const { return strider::is_floating(dtype); }
  int64_t rank() const { return int64_t(shape.size()); }
  int64_t num_elements() const;
  // Element i (row-major) as double / as int64, whatever the dtype. A floating value read
  // as int truncates toward zero and saturates at the int64 range (NaN reads as 0).
  double element_as_double(int64_t i) const;
  int64_t element_as_int(int64_t i) const;
};

// Widens a tensor exactly (every strider dtype is representable in double or int64).
RefTensor ref_from_tensor(const Tensor& tensor);
// Narrows to `as` with the conversion Cast uses: floats round to nearest even, floating to
// integer truncates toward zero, integers wrap to the width of `as`, and to bool is x != 0.
Tensor ref_to_tensor(const RefTensor& value, DType as);

struct ReferenceResult {
  std::vector<RefTensor> outputs;       // the graph outputs, in graph order
  std::map<ValueId, RefTensor> values;  // every value of the run, only when asked for
};

// Evaluates `graph` on `inputs`, keyed by graph input name; the tensors are used exactly as
// given. Every graph input needs an entry unless it has a constant (an initializer that is
// also an input); an input's dtype and its known dims must match the graph's declaration.
// Only the nodes some output depends on run. With `keep_all_values`, `values` holds every
// input, constant and the output of every node that ran.
// Errors name the node: "node 'Conv_3' (Conv): input 1 (W): ...".
Result<ReferenceResult> evaluate_reference(const Graph& graph,
                                           const std::map<std::string, Tensor>& inputs,
                                           bool keep_all_values = false);

// True if the reference implements node.op_type (default ONNX domain) at node.opset.
bool reference_supports(const Node& node);

}  // namespace strider
