// strider_conformance: runs the public ONNX backend node tests (a folder of cases, each
// model.onnx + test_data_set_0/{input,output}_<i>.pb) on strider and prints pass / fail /
// unsupported counts. A case is unsupported when its model uses an op strider does not
// register, an element type strider does not have, or (on a device other than the CPU) an
// op or dtype the device has no kernel for; every other case must run and match
// its expected outputs within ONNX's own tolerance (|a - e| <= 1e-7 + 1e-3 |e| per
// element). Exits 1 when the pass rate of the supported cases is below --min-pass-rate.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <regex>

#include "exec/session_internal.h"
#include "onnx/importer.h"
#include "onnx/tensor_proto.h"
#include "ops/op_registry.h"

namespace strider {
namespace {
namespace fs = std::filesystem;

enum class Outcome { kPass, kFail, kUnsupported };
struct CaseResult {
  Outcome outcome;
  std::string detail;
};

Result<std::vector<Tensor>> read_set(const fs::path& dir, const std::string& prefix, size_t count) {
  std::vector<Tensor> tensors;
  for (size_t i = 0; i < count; ++i) {
    STRIDER_ASSIGN_OR_RETURN(Tensor t, read_tensor_pb((dir / fmt::format("{}_{}.pb", prefix, i)).string()));
    tensors.push_back(std::move(t));
  }
  return tensors;
}

std::string compare_output(const Tensor& actual, const Tensor& expected, size_t index) {
  if (actual.dtype() != expected.dtype() || actual.shape() != expected.shape())
    return fmt::format("output {}: got {}{}, expected {}{}", index, dtype_name(actual.dtype()),
                       shape_to_string(actual.shape()), dtype_name(expected.dtype()), shape_to_string(expected.shape()));
  for (int64_t i = 0; i < actual.num_elements(); ++i) {
    double a = actual.element_as_double(i), e = expected.element_as_double(i);
    if (std::isnan(e) && std::isnan(a)) continue;
    if (a == e) continue;
    if (!(std::fabs(a - e) <= 1e-7 + 1e-3 * std::fabs(e)))
      return fmt::format("output {} element {}: got {:.9g}, expected {:.9g}", index, i, a, e);
  }
  return "";
}

struct RunnerOptions {
  std::string device = "cpu";
  std::string storage_mode;
  std::string dtype = "f32";
};

CaseResult run_case(const fs::path& dir, const RunnerOptions& runner) {
  auto graph = import_model_file((dir / "model.onnx").string());
  if (!graph.is_ok())
    return {graph.status().code() == StatusCode::kUnsupported ? Outcome::kUnsupported : Outcome::kFail,
            graph.status().to_string()};
  Status known = check_ops_known(*graph);
  if (!known.is_ok()) return {Outcome::kUnsupported, known.message()};
  fs::path data = dir / "test_data_set_0";
  auto inputs = read_set(data, "input", graph->inputs().size());
  auto expected = read_set(data, "output", graph->outputs().size());
  if (!inputs.is_ok() || !expected.is_ok())
    return {Outcome::kUnsupported, (inputs.is_ok() ? expected.status() : inputs.status()).to_string()};
  SessionOptions options;
  options.device = runner.device;
  options.storage_mode = runner.storage_mode;
  std::vector<std::string> fixed = shape_determining_inputs(*graph);
  std::vector<Tensor> run_inputs;
  for (size_t i = 0; i < inputs->size(); ++i) {
    const std::string& name = graph->value(graph->inputs()[i]).name;
    if (std::find(fixed.begin(), fixed.end(), name) != fixed.end()) {
      options.constant_inputs[name] = (*inputs)[i];
    } else {
      options.input_shapes[name] = (*inputs)[i].shape();
      run_inputs.push_back((*inputs)[i]);
    }
  }
  auto session = create_session(std::move(*graph), options);
  if (!session.is_ok()) {
    // Another device may lack kernels the CPU has (f64, some integer ops): that is
    // unsupported there, not a wrong answer. On the CPU every op registered must run.
    bool device_lacks = runner.device != "cpu" && session.status().code() == StatusCode::kUnsupported;
    return {device_lacks ? Outcome::kUnsupported : Outcome::kFail, session.status().to_string()};
  }
  auto outputs = (*session)->run(run_inputs);
  if (!outputs.is_ok()) return {Outcome::kFail, outputs.status().to_string()};
  for (size_t i = 0; i < outputs->size(); ++i) {
    std::string mismatch = compare_output((*outputs)[i], (*expected)[i], i);
    if (!mismatch.empty()) return {Outcome::kFail, mismatch};
  }
  return {Outcome::kPass, ""};
}

}  // namespace
}  // namespace strider

int main(int argc, char** argv) {
  using namespace strider;
  CLI::App app("Runs the ONNX backend node tests on strider's CPU device.", "strider_conformance");
  std::string folder, filter = ".*";
  double min_pass_rate = 0.0;
  bool verbose = false, print_ops = false;
  RunnerOptions runner;
  app.add_option("--device", runner.device, "device to run on (cpu, cuda, sim)");
  app.add_option("--storage-mode", runner.storage_mode, "cuda storage mode");
  app.add_option("folder", folder, "folder of node-test cases");
  app.add_option("--filter", filter, "regular expression on case names");
  app.add_option("--min-pass-rate", min_pass_rate, "exit 1 when pass / (pass + fail) is below this");
  app.add_flag("--verbose", verbose, "print every case, unsupported ones included");
  app.add_flag("--print-ops", print_ops, "print the registered op types and exit");
  CLI11_PARSE(app, argc, argv);
  if (print_ops) {
    for (std::string_view op : registered_op_types()) fmt::print("{}\n", op);
    return 0;
  }
  std::vector<fs::path> cases;
  std::error_code ec;
  std::regex pattern(filter);
  for (const auto& entry : fs::directory_iterator(folder, ec))
    if (fs::exists(entry.path() / "model.onnx") && std::regex_search(entry.path().filename().string(), pattern))
      cases.push_back(entry.path());
  if (ec || cases.empty()) {
    fmt::print(stderr, "strider_conformance: no cases in '{}'\n", folder);
    return 2;
  }
  std::sort(cases.begin(), cases.end());
  int pass = 0, fail = 0, unsupported_count = 0;
  for (const fs::path& dir : cases) {
    CaseResult r = run_case(dir, runner);
    std::string name = dir.filename().string();
    if (r.outcome == Outcome::kPass) ++pass;
    if (r.outcome == Outcome::kUnsupported) ++unsupported_count;
    if (r.outcome == Outcome::kFail) {
      ++fail;
      fmt::print("FAIL {}: {}\n", name, r.detail);
    } else if (verbose) {
      fmt::print("{} {}{}\n", r.outcome == Outcome::kPass ? "pass" : "unsupported", name,
                 r.detail.empty() ? "" : ": " + r.detail);
    }
  }
  double rate = pass + fail ? double(pass) / double(pass + fail) : 1.0;
  fmt::print("conformance on {}: {} pass, {} fail, {} unsupported; pass rate {:.1f}% of {} supported cases\n",
             runner.device, pass, fail, unsupported_count, 100.0 * rate, pass + fail);
  return rate + 1e-12 < min_pass_rate ? 1 : 0;
}
