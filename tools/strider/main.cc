// The `strider` command line: run, check, inspect, bench, serve.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <exception>
#include <new>

#include "commands.h"
#include "strider/tools.h"

int main(int argc, char** argv) {
  using namespace strider::cli;
  CLI::App app("strider: an ONNX inference runtime for CPU and NVIDIA GPUs whose views, offsets and\n"
               "async ordering are correct by construction.", "strider");
  app.require_subcommand(0, 1);
  app.set_version_flag("--version", strider::version_text());
  app.footer(
      "Exit codes: 0 ok, 1 a check failed, 2 usage error (bad options or inputs), 3 invalid or\n"
      "unsupported model, 4 device or runtime failure.\n"
      "Run 'strider SUBCOMMAND --help' for a subcommand's options and examples.");
  RunOptions run;
  CheckOptions check;
  InspectOptions inspect;
  BenchOptions bench;
  ServeOptions serve;
  add_run_command(app, run);
  add_check_command(app, check);
  add_inspect_command(app, inspect);
  add_bench_command(app, bench);
  add_serve_command(app, serve);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version (CallForHelp and friends derive from it)
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return report_error(strider::invalid_argument(std::string(e.what()) + "; see 'strider --help'"));
  }
  // The exception boundary: whatever a library throws on a hostile model ends as one
  // error line and an exit code, never as std::terminate.
  // (The library itself returns Statuses; this catches what escapes a dependency.)
  try {
    if (run.selected) return run_command(run);
    if (check.selected) return check_command(check);
    if (inspect.selected) return inspect_command(inspect);
    if (bench.selected) return bench_command(bench);
    if (serve.selected) return serve_command(serve);
    fmt::print("{}", app.help());
    return kExitUsage;
  } catch (const std::bad_alloc&) {
    return report_error(strider::resource_exhausted("strider: out of memory"));
  } catch (const std::exception& e) {
    return report_error(strider::internal_error(std::string("strider: unexpected exception: ") + e.what()));
  } catch (...) {
    return report_error(strider::internal_error("strider: unexpected exception"));
  }
}
