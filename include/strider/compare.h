// Comparing an output with its reference: the figures `strider check`, the tests and the
// benchmarks report, and the pass/fail rule they share.
//
// Tolerances are relative to the output's scale (the largest |reference| value), so one
// rule fits outputs of any magnitude: an output passes when
//   max |actual - reference| <= atol + rtol * scale,
//   cosine(actual, reference) >= min_cosine, and
//   actual has no NaN/Inf where the reference is finite.
// Integer and bool outputs must match exactly.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "strider/dtype.h"

namespace strider {

struct Tolerance {
  double rtol = 1e-4;
  double atol = 1e-6;
  double min_cosine = 0.9999;
};

// Defaults for the dtype the model computed in: f32 (rtol 1e-4) or bf16 (rtol 2e-2,
// cosine >= 0.999).
Tolerance default_tolerance(DType compute_dtype);

struct Comparison {
  int64_t count = 0;
  double max_abs_error = 0;
  double max_rel_error = 0;   // max_abs_error / scale
  double scale = 0;           // max |reference|
  double cosine = 1;          // 1 when both are all zero
  int64_t nonfinite_mismatches = 0;  // NaN/Inf in actual where the reference is finite
  bool shape_mismatch = false;
  bool passed = false;
  std::string reason;  // why it failed, empty when passed
};

// `actual` and `reference` are row-major element values of the same shape (as doubles).
Comparison compare_values(const std::vector<double>& actual, const std::vector<double>& reference,
                          const Tolerance& tolerance, bool exact);

// One intermediate value of a run, as `strider check` collects them in step order.
struct NodeValue {
  std::string value, node, op_type;
  std::vector<double> actual;
  bool exact = false;  // integer or bool: must match exactly
};

struct Divergence {
  size_t index = 0;  // into the values given
  Comparison comparison;
};

// The first value, in the order given, that fails against its reference (keyed by value
// name); values without a reference (strider's own, such as a Materialize's copy) are
// skipped. nullopt when all pass. Since every value before it matched, its node is the
// first to go wrong, given inputs that were right.
std::optional<Divergence> first_divergence(const std::vector<NodeValue>& values,
                                           const std::map<std::string, std::vector<double>>& reference,
                                           const Tolerance& tolerance);

}  // namespace strider
