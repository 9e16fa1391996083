// The `strider` command line: run, check, inspect, bench.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "base/exception_guard.h"
#include "commands.h"

int main(int argc, char** argv) {
  using namespace strider::cli;
  CLI::App app("strider: an ONNX inference runtime for CPU and NVIDIA GPUs whose views, offsets and\n"
               "async ordering are correct by construction.", "strider");
  app.require_subcommand(0, 1);
  app.set_version_flag("--version", version_text());
  app.footer(
      "Exit codes: 0 ok, 1 a check failed, 2 usage error (bad options or inputs), 3 invalid or\n"
      "unsupported model, 4 device or runtime failure.\n"
      "Run 'strider SUBCOMMAND --help' for a subcommand's options and examples.");
  RunOptions run;
  CheckOptions check;
  InspectOptions inspect;
  BenchOptions bench;
  add_run_command(app, run);
  add_check_command(app, check);
  add_inspect_command(app, inspect);
  add_bench_command(app, bench);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version (CallForHelp and friends derive from it)
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return report_error(strider::invalid_argument(std::string(e.what()) + "; see 'strider --help'"));
  }
  // The exception boundary: whatever a library throws on a hostile model ends as one
  // error line and an exit code, never as std::terminate.
  int code = kExitUsage;
  strider::Status failed = strider::guard("strider", [&] {
    if (run.selected) code = run_command(run);
    else if (check.selected) code = check_command(check);
    else if (inspect.selected) code = inspect_command(inspect);
    else if (bench.selected) code = bench_command(bench);
    else fmt::print("{}", app.help());
    return strider::Status::ok();
  });
  return failed.is_ok() ? code : report_error(failed);
}
