#include "strider/compare.h"

#include <fmt/format.h>

#include <cmath>

namespace strider {

Tolerance default_tolerance(DType compute_dtype) {
  if (compute_dtype == DType::kBF16 || compute_dtype == DType::kF16) return {2e-2, 1e-3, 0.999};
  return {1e-4, 1e-6, 0.9999};
}

Comparison compare_values(const std::vector<double>& actual, const std::vector<double>& reference,
                          const Tolerance& tolerance, bool exact) {
  Comparison c;
  if (actual.size() != reference.size()) {
    c.shape_mismatch = true;
    c.reason = fmt::format("{} elements, reference has {}", actual.size(), reference.size());
    return c;
  }
  c.count = int64_t(actual.size());
  double dot = 0, norm_a = 0, norm_r = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    double a = actual[i], r = reference[i];
    if (!std::isfinite(r)) {
      if (!(std::isnan(r) ? std::isnan(a) : a == r)) ++c.nonfinite_mismatches;
      continue;
    }
    if (!std::isfinite(a)) {
      ++c.nonfinite_mismatches;
      continue;
    }
    c.scale = std::max(c.scale, std::fabs(r));
    c.max_abs_error = std::max(c.max_abs_error, std::fabs(a - r));
    dot += a * r;
    norm_a += a * a;
    norm_r += r * r;
  }
  c.max_rel_error = c.scale > 0 ? c.max_abs_error / c.scale : c.max_abs_error;
  if (norm_a > 0 && norm_r > 0) c.cosine = dot / std::sqrt(norm_a * norm_r);
  else c.cosine = (norm_a == 0 && norm_r == 0) ? 1.0 : 0.0;
  double allowed = exact ? 0.0 : tolerance.atol + tolerance.rtol * c.scale;
  if (c.nonfinite_mismatches > 0)
    c.reason = fmt::format("{} NaN/Inf values where the reference has none (or other ones)", c.nonfinite_mismatches);
  else if (c.max_abs_error > allowed)
    c.reason = fmt::format("max abs error {:.3g} > {:.3g} (atol {:.3g} + rtol {:.3g} x scale {:.3g})",
                           c.max_abs_error, allowed, exact ? 0.0 : tolerance.atol, exact ? 0.0 : tolerance.rtol, c.scale);
  else if (!exact && c.cosine < tolerance.min_cosine)
    c.reason = fmt::format("cosine {:.6f} < {:.6f}", c.cosine, tolerance.min_cosine);
  c.passed = c.reason.empty();
  return c;
}

std::optional<Divergence> first_divergence(const std::vector<NodeValue>& values,
                                           const std::map<std::string, std::vector<double>>& reference,
                                           const Tolerance& tolerance) {
  for (size_t i = 0; i < values.size(); ++i) {
    auto expected = reference.find(values[i].value);
    if (expected == reference.end()) continue;
    Comparison c = compare_values(values[i].actual, expected->second, tolerance, values[i].exact);
    if (!c.passed) return Divergence{i, std::move(c)};
  }
  return std::nullopt;
}

}  // namespace strider
