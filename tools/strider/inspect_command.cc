// `strider inspect`: the plan as readable text (and optionally JSON and an SVG memory
// timeline): which values are views, which concat parts are written in place, the arena.
#include <fmt/format.h>

#include "cli_common.h"
#include "commands.h"
#include "strider/tools.h"

namespace strider::cli {
void add_inspect_command(CLI::App& app, InspectOptions& options) {
  CLI::App* inspect = app.add_subcommand("inspect", "print the memory plan: views, concat in place, the arena");
  add_model_options(*inspect, options.model);
  inspect->add_option("--json", options.json_file, "write the plan's figures and steps as JSON here");
  inspect->add_option("--svg", options.svg_file, "draw the arena's memory timeline as SVG here");
  inspect->footer(
      "Each step lists its operands as allocation+offset, dtype and sizes, strides, and how\n"
      "the value got its bytes (own, view of, written in place into a concat, in place over).\n\n"
      "Examples:\n"
      "  strider inspect model.onnx\n"
      "  strider inspect model.onnx --layout nhwc --json plan.json --svg plan.svg");
  inspect->callback([&options] { options.selected = true; });
}

Result<std::string> inspect_report(const InspectOptions& o) {
  STRIDER_ASSIGN_OR_RETURN(PreparedRun prepared, prepare_run(o.model, o.model.model, o.model.inputs_dir));
  return plan_json(*prepared.session);
}

int inspect_command(const InspectOptions& o) {
  auto prepared = prepare_run(o.model, o.model.model, o.model.inputs_dir);
  if (!prepared.is_ok()) return report_error(prepared.status());
  const Session& session = *prepared->session;
  fmt::print("{}", plan_text(session));
  if (!o.json_file.empty()) {
    Status s = write_text_file(o.json_file, plan_json(session), "--json");
    if (!s.is_ok()) return report_error(s);
  }
  if (!o.svg_file.empty()) {
    Status s = write_text_file(o.svg_file, plan_svg(session), "--svg");
    if (!s.is_ok()) return report_error(s);
  }
  return kExitOk;
}

}  // namespace strider::cli
