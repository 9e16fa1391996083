#include "exec/model_impl.h"

#include "base/exception_guard.h"
#include "base/memory_budget.h"
#include "exec/session_internal.h"
#include "onnx/importer.h"

namespace strider {
namespace {

ValueInfo describe(const Value& v) {
  ValueInfo info{v.name, v.dtype, v.has_shape ? v.shape : Shape{}, v.dim_params};
  info.dim_params.resize(info.shape.size());
  for (std::string& p : info.dim_params)
    if (p == "?") p.clear();  // the importer's mark for a dynamic dim without a name
  return info;
}

}  // namespace

std::vector<ValueInfo> describe_inputs(const Graph& graph) {
  std::vector<ValueInfo> infos;
  for (ValueId id : graph.inputs()) infos.push_back(describe(graph.value(id)));
  return infos;
}

std::vector<ValueInfo> describe_outputs(const Graph& graph) {
  std::vector<ValueInfo> infos;
  for (size_t i = 0; i < graph.outputs().size(); ++i) {
    const bool declared = i < graph.declared_outputs().size() && graph.declared_outputs()[i].has_type;
    infos.push_back(describe(declared ? graph.declared_outputs()[i] : graph.value(graph.outputs()[i])));
  }
  return infos;
}

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::~Model() = default;

Result<std::shared_ptr<const Model>> Model::load(const std::string& path, const Options& options) {
  return guard("loading the model", [&]() -> Result<std::shared_ptr<const Model>> {
    auto impl = std::make_unique<Impl>();
    ImportOptions import_options;
    import_options.max_constant_bytes = options.max_constant_bytes > 0 ? options.max_constant_bytes : default_host_memory_budget();
    STRIDER_ASSIGN_OR_RETURN(impl->graph, import_model_file(path, import_options));
    impl->path = path;
    impl->inputs = describe_inputs(impl->graph);
    impl->outputs = describe_outputs(impl->graph);
    impl->shape_inputs = shape_determining_inputs(impl->graph);
    return std::shared_ptr<const Model>(std::make_shared<Model>(std::move(impl)));
  });
}

const std::string& Model::path() const { return impl_->path; }
const std::vector<ValueInfo>& Model::inputs() const { return impl_->inputs; }
const std::vector<ValueInfo>& Model::outputs() const { return impl_->outputs; }
const std::vector<std::string>& Model::shape_inputs() const { return impl_->shape_inputs; }

}  // namespace strider
