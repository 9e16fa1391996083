// The float64 reference interpreter on a Model: the oracle `strider check` and the tests
// compare against. It is independent of every device and of the planner (naive loops over
// dense float64 tensors), so it shares none of their bugs.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "strider/model.h"

namespace strider {

struct ReferenceValues {
  std::vector<std::vector<double>> outputs;           // per model output, row-major
  std::map<std::string, std::vector<double>> values;  // every value by name, when asked
};

// Evaluates `model` on `inputs` (every model input, by name). With compute_dtype bf16, f32
// inputs are first rounded to bf16, as a bf16 session consumes them. `keep_all_values`
// fills ReferenceValues::values (for naming the first node that went wrong).
Result<ReferenceValues> evaluate_model_reference(const Model& model, const std::map<std::string, Tensor>& inputs,
                                                 DType compute_dtype, bool keep_all_values = false);

}  // namespace strider
