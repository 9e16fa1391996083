// The tools' view of a session (strider/tools.h): plan dumps and summaries, tool sessions.
#include "strider/tools.h"

#include "base/exception_guard.h"
#include "base/sha256.h"
#include "exec/model_impl.h"
#include "exec/session_impl.h"
#include "exec/session_internal.h"
#include "onnx/file_io.h"
#include "plan/dump.h"

namespace strider {

Result<std::unique_ptr<Session>> create_tool_session(const Model& model, const SessionOptions& options,
                                                     const ToolSessionOptions& tool_options) {
  return guard("creating the session", [&]() -> Result<std::unique_ptr<Session>> {
    SessionDebugOptions debug;
    debug.drop_waits = tool_options.drop_waits;
    STRIDER_ASSIGN_OR_RETURN(PlanOptions plan_options, plan_options_for(options));
    return create_session(model.impl().graph, options, plan_options, nullptr, debug);
  });
}

std::string plan_text(const Session& session) {
  SessionPlanView view = inspect_session(session);
  std::string text;
  if (const StagedRun* staged = SessionAccess::impl(session).staged.get())
    for (const std::string& line : staged->describe()) text += "# " + line + "\n";
  return text + plan_to_text(*view.graph, *view.plan, view.kernel_names);
}

std::string plan_json(const Session& session) {
  SessionPlanView view = inspect_session(session);
  return plan_to_json(*view.graph, *view.plan, view.kernel_names);
}

std::string plan_svg(const Session& session) {
  SessionPlanView view = inspect_session(session);
  return plan_to_svg(*view.graph, *view.plan);
}

PlanSummary plan_summary(const Session& session) {
  SessionPlanView view = inspect_session(session);
  PlanSummary summary;
  summary.layout = view.plan->layout;
  summary.uses_cuda_graph = view.uses_graph;
  for (const auto& a : view.plan->placeholders) summary.allocations.emplace_back(a->label(), a->size());
  return summary;
}

Result<std::string> file_sha256(const std::string& path) {
  STRIDER_ASSIGN_OR_RETURN(std::vector<std::byte> bytes, onnx_io::read_file(path, "model"));
  return sha256_hex(bytes);
}

}  // namespace strider
