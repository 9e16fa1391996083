#include "base/shape.h"

#include <algorithm>

#include "base/check.h"
#include "base/checked_math.h"

namespace strider {

// Shapes reaching here were validated (checked_element_count) where they entered: an
// overflow is a strider bug that would otherwise read past a buffer, so it aborts.
int64_t num_elements(std::span<const int64_t> sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) {
    auto next = checked_mul(n, s);
    STRIDER_CHECK(next.has_value(), "element count of {} overflows", shape_to_string(sizes));
    n = *next;
  }
  return n;
}

Strides contiguous_strides(std::span<const int64_t> sizes) {
  Strides strides(sizes.size());
  int64_t running = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = running;
    auto next = checked_mul(running, std::max<int64_t>(sizes[i], 1));
    STRIDER_CHECK(next.has_value(), "strides of {} overflow", shape_to_string(sizes));
    running = *next;
  }
  return strides;
}

std::string shape_to_string(std::span<const int64_t> sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(sizes[i]);
  }
  return s + "]";
}

std::string shape_to_dims(std::span<const int64_t> sizes) {
  if (sizes.empty()) return "scalar";
  std::string s;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i) s += "x";
    s += std::to_string(sizes[i]);
  }
  return s;
}

bool broadcast_shapes(std::span<const int64_t> a, std::span<const int64_t> b, Shape* out) {
  size_t rank = std::max(a.size(), b.size());
  Shape result(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) return false;
    result[i] = da == 1 ? db : da;
  }
  *out = std::move(result);
  return true;
}

bool normalize_axis(int64_t axis, int64_t rank, int64_t* out) {
  if (axis < -rank || axis >= rank) return false;
  *out = axis < 0 ? axis + rank : axis;
  return true;
}

}  // namespace strider
