// The ops whose output shapes depend on their input values: NonZero, Compress, Unique and
// NonMaxSuppression. Written apart from the runtime's (ops/data_dependent.cc): Unique
// groups through an ordered map, NonMaxSuppression computes its overlaps in double.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <variant>

#include "base/shape.h"
#include "reference/op_support.h"

namespace strider::ref {
namespace {

RefTensor int64_tensor(Shape shape, std::vector<int64_t> values) {
  RefTensor t = RefTensor::zeros(DType::kI64, std::move(shape));
  t.ints = std::move(values);
  return t;
}

Result<OpOutputs> nonzero_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "X"));
  std::vector<std::vector<int64_t>> coordinates;  // per nonzero element
  std::vector<int64_t> index(size_t(x->rank()), 0);
  for (int64_t i = 0; i < x->num_elements(); ++i) {
    bool nonzero = x->is_floating() ? x->floats[size_t(i)] != 0.0 : x->ints[size_t(i)] != 0;
    if (nonzero) coordinates.push_back(index);
    for (size_t d = index.size(); d-- > 0;) {  // the next row-major index
      if (++index[d] < x->shape[d]) break;
      index[d] = 0;
    }
  }
  const int64_t count = int64_t(coordinates.size());
  RefTensor y = int64_tensor({x->rank(), count}, std::vector<int64_t>(size_t(x->rank() * count)));
  for (int64_t k = 0; k < count; ++k)
    for (int64_t d = 0; d < x->rank(); ++d) y.ints[size_t(d * count + k)] = coordinates[size_t(k)][size_t(d)];
  return OpOutputs{std::move(y)};
}

// Element positions of slice k along `axis` (all of x as one axis when absent).
struct Slicing {
  int64_t outer = 1, count = 0, inner = 1, axis = -1;
  std::vector<int64_t> positions(int64_t k) const {
    std::vector<int64_t> p;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) p.push_back((o * count + k) * inner + i);
    return p;
  }
};
Result<Slicing> slicing_of(const OpContext& ctx, const RefTensor& x) {
  Slicing s;
  s.count = x.num_elements();
  if (!ctx.attributes().has("axis")) return s;
  STRIDER_ASSIGN_OR_RETURN(int64_t axis, ctx.attributes().get_int("axis", 0));
  if (!normalize_axis(axis, x.rank(), &s.axis)) return invalid_model(fmt::format("axis {} is out of range", axis));
  s.count = x.shape[size_t(s.axis)];
  s.outer = 1;
  for (int64_t d = 0; d < s.axis; ++d) s.outer *= x.shape[size_t(d)];
  for (int64_t d = s.axis + 1; d < x.rank(); ++d) s.inner *= x.shape[size_t(d)];
  return s;
}

// x's slices `picked`, in that order, along the slicing's axis.
RefTensor take_slices(const RefTensor& x, const Slicing& s, const std::vector<int64_t>& picked) {
  Shape shape{int64_t(picked.size())};
  if (s.axis >= 0) {
    shape = x.shape;
    shape[size_t(s.axis)] = int64_t(picked.size());
  }
  RefTensor y = RefTensor::zeros(x.dtype, shape);
  size_t to = 0;
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t k : picked)
      for (int64_t i = 0; i < s.inner; ++i, ++to) {
        const size_t from = size_t((o * s.count + k) * s.inner + i);
        if (x.is_floating()) y.floats[to] = x.floats[from];
        else y.ints[to] = x.ints[from];
      }
  return y;
}

Result<OpOutputs> compress_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "input"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* condition, ctx.input(1, "condition"));
  STRIDER_ASSIGN_OR_RETURN(Slicing s, slicing_of(ctx, *x));
  if (condition->is_floating()) return invalid_model(fmt::format("condition {} must be bool", describe(*condition)));
  if (condition->rank() != 1 || condition->num_elements() > s.count)
    return invalid_model(fmt::format("condition {} does not fit the {} slices", describe(*condition), s.count));
  std::vector<int64_t> picked;
  for (int64_t k = 0; k < condition->num_elements(); ++k)
    if (condition->ints[size_t(k)] != 0) picked.push_back(k);
  return OpOutputs{take_slices(*x, s, picked)};
}

Result<OpOutputs> unique_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "X"));
  STRIDER_ASSIGN_OR_RETURN(Slicing s, slicing_of(ctx, *x));
  STRIDER_ASSIGN_OR_RETURN(int64_t sorted, ctx.attributes().get_int("sorted", 1));
  // A slice's elements, compared lexicographically; u64 past 2^63 by its unsigned order.
  using Key = std::variant<std::vector<double>, std::vector<uint64_t>, std::vector<int64_t>>;
  auto key_of = [&](int64_t k) -> Key {
    std::vector<int64_t> p = s.positions(k);
    if (x->is_floating()) {
      std::vector<double> v;
      for (int64_t i : p) v.push_back(x->floats[size_t(i)]);
      return v;
    }
    if (x->dtype == DType::kU64) {
      std::vector<uint64_t> v;
      for (int64_t i : p) v.push_back(uint64_t(x->ints[size_t(i)]));
      return v;
    }
    std::vector<int64_t> v;
    for (int64_t i : p) v.push_back(x->ints[size_t(i)]);
    return v;
  };
  std::map<Key, std::vector<int64_t>> occurrences;  // ascending keys, each with its slices
  std::vector<Key> keys;
  for (int64_t k = 0; k < s.count; ++k) {
    keys.push_back(key_of(k));
    occurrences[keys.back()].push_back(k);
  }
  std::vector<const std::vector<int64_t>*> groups;
  for (const auto& entry : occurrences) groups.push_back(&entry.second);
  if (sorted == 0)
    std::sort(groups.begin(), groups.end(), [](const auto* a, const auto* b) { return a->front() < b->front(); });
  std::vector<int64_t> first, counts, inverse(size_t(s.count));
  for (size_t g = 0; g < groups.size(); ++g) {
    first.push_back(groups[g]->front());
    counts.push_back(int64_t(groups[g]->size()));
    for (int64_t k : *groups[g]) inverse[size_t(k)] = int64_t(g);
  }
  const int64_t n = int64_t(first.size());
  return OpOutputs{take_slices(*x, s, first), int64_tensor({n}, first), int64_tensor({s.count}, inverse),
                   int64_tensor({n}, counts)};
}

double optional_scalar(const OpContext& ctx, size_t i, double fallback) {
  const RefTensor* t = ctx.optional_input(i);
  return t && t->num_elements() > 0 ? t->element_as_double(0) : fallback;
}

Result<OpOutputs> non_max_suppression_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* boxes, ctx.input(0, "boxes"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* scores, ctx.input(1, "scores"));
  if (!boxes->is_floating() || !scores->is_floating())
    return invalid_model(fmt::format("boxes {} and scores {} must be floating", describe(*boxes), describe(*scores)));
  if (boxes->rank() != 3 || boxes->shape[2] != 4 || scores->rank() != 3 || scores->shape[0] != boxes->shape[0] ||
      scores->shape[2] != boxes->shape[1])
    return invalid_model(fmt::format("boxes {} and scores {} do not match", describe(*boxes), describe(*scores)));
  STRIDER_ASSIGN_OR_RETURN(int64_t center, ctx.attributes().get_int("center_point_box", 0));
  const RefTensor* limit = ctx.optional_input(2);  // torch exports INT64_MAX: read it as an integer
  const int64_t per_class = limit && limit->num_elements() > 0 ? limit->element_as_int(0) : 0;
  const double iou_threshold = optional_scalar(ctx, 3, 0);
  const RefTensor* score_threshold = ctx.optional_input(4);
  const int64_t batches = boxes->shape[0], classes = scores->shape[1], n = boxes->shape[1];
  // {top, left, bottom, right} of box i of batch b.
  auto box = [&](int64_t b, int64_t i) {
    const double* v = &boxes->floats[size_t((b * n + i) * 4)];
    if (center == 1) return std::array<double, 4>{v[1] - v[3] / 2, v[0] - v[2] / 2, v[1] + v[3] / 2, v[0] + v[2] / 2};
    return std::array<double, 4>{std::min(v[0], v[2]), std::min(v[1], v[3]), std::max(v[0], v[2]), std::max(v[1], v[3])};
  };
  auto iou = [](const std::array<double, 4>& a, const std::array<double, 4>& c) {
    const double area_a = (a[2] - a[0]) * (a[3] - a[1]), area_c = (c[2] - c[0]) * (c[3] - c[1]);
    if (area_a <= 0 || area_c <= 0) return 0.0;
    const double h = std::max(0.0, std::min(a[2], c[2]) - std::max(a[0], c[0]));
    const double w = std::max(0.0, std::min(a[3], c[3]) - std::max(a[1], c[1]));
    return h * w / (area_a + area_c - h * w);
  };
  std::vector<int64_t> rows;
  for (int64_t b = 0; b < batches; ++b)
    for (int64_t c = 0; c < classes; ++c) {
      std::vector<std::pair<double, int64_t>> ranked;  // (-score, index): ascending is the visiting order
      for (int64_t i = 0; i < n; ++i) {
        const double score = scores->floats[size_t((b * classes + c) * n + i)];
        if (score_threshold && score_threshold->num_elements() > 0 && !(score > score_threshold->element_as_double(0)))
          continue;
        ranked.emplace_back(-score, i);
      }
      std::sort(ranked.begin(), ranked.end());
      std::vector<int64_t> kept;
      for (const auto& [negated, i] : ranked) {
        if (int64_t(kept.size()) >= per_class) break;
        bool suppressed = false;
        for (int64_t k : kept) suppressed = suppressed || iou(box(b, k), box(b, i)) > iou_threshold;
        if (suppressed) continue;
        kept.push_back(i);
        rows.insert(rows.end(), {b, c, i});
      }
    }
  return OpOutputs{int64_tensor({int64_t(rows.size() / 3), 3}, rows)};
}

constexpr OpDefinition kSelectionOps[] = {
    {"NonZero", 9, 27, nonzero_op},
    {"Compress", 9, 27, compress_op},
    {"Unique", 11, 27, unique_op},
    {"NonMaxSuppression", 10, 27, non_max_suppression_op},
};

}  // namespace

std::span<const OpDefinition> selection_op_definitions() { return kSelectionOps; }

}  // namespace strider::ref
