// strider_conformance: runs the public ONNX backend node tests (a folder of cases, each
// model.onnx + test_data_set_0/{input,output}_<i>.pb) on strider and prints pass / fail /
// unsupported counts. A case is unsupported when its model uses an op strider does not
// register, an element type strider does not have, or (on a device other than the CPU) an
// op or dtype the device has no kernel for; every other case must run and match
// its expected outputs within ONNX's own tolerance (|a - e| <= 1e-7 + 1e-3 |e| per
// element).
//
// With --expected-failures FILE (one "case_name: reason" per line) the run fails (exit 1)
// on any failure the file does not list and on any listed case that passes (the list
// must shrink when strider improves), so no single new failure can hide in a pass rate.
// --all-supported also fails the run on an unsupported case (the vendored folder holds
// only cases strider supports). --min-pass-rate remains for sweeps of other folders.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
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
  int queues = 1;
  bool sanitize = false;
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
  if (!runner.storage_mode.empty()) options.storage_mode = *parse_storage_mode(runner.storage_mode);
  options.queues = runner.queues;
  options.sanitize = runner.sanitize;
  options.sim_seed = 7;
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

// "test_name: reason" lines; blank lines and lines starting with '#' are skipped.
Result<std::map<std::string, std::string>> read_expected_failures(const std::string& path) {
  std::ifstream in(path);
  if (!in) return not_found(fmt::format("cannot read expected failures '{}'", path));
  std::map<std::string, std::string> failures;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    size_t colon = line.find(':');
    if (colon == std::string::npos || colon == 0 || line.find_first_not_of(" ", colon + 1) == std::string::npos)
      return invalid_argument(fmt::format("{}: '{}' is not 'case_name: reason'", path, line));
    failures[line.substr(0, colon)] = line.substr(line.find_first_not_of(" ", colon + 1));
  }
  return failures;
}

}  // namespace
}  // namespace strider

int main(int argc, char** argv) {
  using namespace strider;
  CLI::App app("Runs the ONNX backend node tests on strider's CPU device.", "strider_conformance");
  std::string folder, filter = ".*";
  double min_pass_rate = 0.0;
  bool verbose = false, print_ops = false, all_supported = false;
  std::string expected_failures_file;
  RunnerOptions runner;
  app.add_option("--device", runner.device, "device to run on (cpu, cuda, sim)");
  app.add_option("--storage-mode", runner.storage_mode, "cuda storage mode")
      ->check(CLI::IsMember({"device", "unified", "host"}));
  app.add_option("--queues", runner.queues, "device queues (sim: independent branches run in a seeded random order)");
  app.add_flag("--sanitize", runner.sanitize, "check that every conflicting pair of accesses is ordered");
  app.add_option("folder", folder, "folder of node-test cases");
  app.add_option("--filter", filter, "regular expression on case names");
  app.add_option("--min-pass-rate", min_pass_rate, "exit 1 when pass / (pass + fail) is below this");
  app.add_option("--expected-failures", expected_failures_file,
                 "file of 'case_name: reason' lines; any other failure, or a listed case passing, exits 1");
  app.add_flag("--all-supported", all_supported, "exit 1 on any unsupported case");
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
  std::map<std::string, std::string> expected_failures;
  if (!expected_failures_file.empty()) {
    auto read = read_expected_failures(expected_failures_file);
    if (!read.is_ok()) {
      fmt::print(stderr, "strider_conformance: {}\n", read.status().to_string());
      return 2;
    }
    expected_failures = std::move(*read);
  }
  int pass = 0, fail = 0, unsupported_count = 0, surprises = 0;
  for (const fs::path& dir : cases) {
    CaseResult r = run_case(dir, runner);
    std::string name = dir.filename().string();
    bool listed = expected_failures.count(name) != 0;
    if (r.outcome == Outcome::kPass) ++pass;
    if (r.outcome == Outcome::kUnsupported) ++unsupported_count;
    // A listed case may also be unsupported (a device that refuses the op outright, as sim
    // and cuda refuse training mode): it does not pass, so the list need not shrink.
    const bool surprise = listed ? r.outcome == Outcome::kPass : r.outcome == Outcome::kFail;
    if (!expected_failures_file.empty() && surprise) {
      ++surprises;
      fmt::print("UNEXPECTED {} {}: {}\n", r.outcome == Outcome::kPass ? "PASS" : r.outcome == Outcome::kFail ? "FAIL" : "UNSUPPORTED",
                 name, listed ? "listed as failing (" + expected_failures[name] + "); update the list" : r.detail);
    } else if (all_supported && r.outcome == Outcome::kUnsupported) {
      ++surprises;
      fmt::print("UNEXPECTED UNSUPPORTED {}: {}\n", name, r.detail);
    }
    if (r.outcome == Outcome::kFail) {
      ++fail;
      fmt::print("FAIL {}: {}{}\n", name, r.detail, listed ? " (expected: " + expected_failures[name] + ")" : "");
    } else if (verbose) {
      fmt::print("{} {}{}\n", r.outcome == Outcome::kPass ? "pass" : "unsupported", name,
                 r.detail.empty() ? "" : ": " + r.detail);
    }
  }
  double rate = pass + fail ? double(pass) / double(pass + fail) : 1.0;
  fmt::print("conformance on {}: {} pass, {} fail, {} unsupported; pass rate {:.1f}% of {} supported cases\n",
             runner.device, pass, fail, unsupported_count, 100.0 * rate, pass + fail);
  if (!expected_failures_file.empty() || all_supported)
    fmt::print("{} unexpected result{}\n", surprises, surprises == 1 ? "" : "s");
  return surprises > 0 || rate + 1e-12 < min_pass_rate ? 1 : 0;
}
