#include "memory/collapse.h"

namespace strider {

CollapsedDims collapse_dims(std::span<const int64_t> sizes, const std::vector<Strides>& operand_strides) {
  CollapsedDims c;
  c.strides.resize(operand_strides.size());
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;
    bool mergeable = !c.sizes.empty();
    for (size_t k = 0; mergeable && k < operand_strides.size(); ++k)
      mergeable = c.strides[k].back() == operand_strides[k][d] * sizes[d];
    if (mergeable) {
      c.sizes.back() *= sizes[d];
      for (size_t k = 0; k < operand_strides.size(); ++k) c.strides[k].back() = operand_strides[k][d];
      continue;
    }
    c.sizes.push_back(sizes[d]);
    for (size_t k = 0; k < operand_strides.size(); ++k) c.strides[k].push_back(operand_strides[k][d]);
  }
  return c;
}

}  // namespace strider
