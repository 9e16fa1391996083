// evaluate_model_reference (strider/reference.h): the reference interpreter on a Model's graph.
#include "strider/reference.h"

#include "exec/model_impl.h"
#include "passes/lower_precision.h"
#include "reference/reference.h"

namespace strider {
namespace {

std::vector<double> as_doubles(const RefTensor& t) {
  std::vector<double> v(size_t(t.num_elements()));
  for (int64_t i = 0; i < t.num_elements(); ++i) v[size_t(i)] = t.element_as_double(i);
  return v;
}

}  // namespace

Result<ReferenceValues> evaluate_model_reference(const Model& model, const std::map<std::string, Tensor>& given,
                                                 DType compute_dtype, bool keep_all_values) {
  std::map<std::string, Tensor> inputs = given;
  if (compute_dtype == DType::kBF16)
    for (auto& [name, t] : inputs) {
      if (t.dtype() != DType::kF32) continue;
      STRIDER_ASSIGN_OR_RETURN(Tensor rounded, convert_float_tensor(t, DType::kBF16));
      STRIDER_ASSIGN_OR_RETURN(t, convert_float_tensor(rounded, DType::kF32));
    }
  const Graph& graph = model.impl().graph;
  auto result = evaluate_reference(graph, inputs, keep_all_values);
  if (!result.is_ok()) return result.status().with_context("reference");
  ReferenceValues values;
  for (const RefTensor& t : result->outputs) values.outputs.push_back(as_doubles(t));
  for (const auto& [id, value] : result->values) values.values[graph.value(id).name] = as_doubles(value);
  return values;
}

}  // namespace strider
