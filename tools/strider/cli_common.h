// Shared pieces of the `strider` subcommands: model and input options, loading inputs,
// creating the session, exit codes and the one-line error format.
#pragma once

#include <CLI/CLI.hpp>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "strider/model.h"
#include "strider/session.h"

namespace strider::cli {

// Exit codes (also in `strider --help`).
enum ExitCode : int {
  kExitOk = 0,
  kExitCheckFailed = 1,
  kExitUsage = 2,
  kExitBadModel = 3,
  kExitRuntime = 4,
};

// The exit code a Status maps to: usage (bad inputs, options, missing files), bad model
// (invalid or unsupported), or runtime (device, I/O and internal failures).
int exit_code_for(const Status& status);
// Prints "strider: error: CODE: message" to stderr (a hazard: each finding as
// "strider: hazard: ...") and returns the exit code.
int report_error(const Status& status);

struct ModelOptions {
  std::string model;
  std::vector<std::string> input_files;   // NAME=FILE
  std::string inputs_dir;
  bool random_inputs = false;
  uint64_t seed = 0;
  std::vector<std::string> shapes;        // NAME:AxBxC
  std::string dtype = "f32";
  std::string device = "cpu";
  std::string layout = "auto";
  int queues = 1;
  int threads = 0;
  bool sanitize = false;
  bool debug_drop_waits = false;
  uint64_t sim_seed = 0;
  std::string storage_mode;
  bool allow_tf32 = false;
  std::string winograd = "on";
  std::string cuda_graph = "on";
  std::string fusion = "on";
  std::string max_memory;  // "" (80% of memory), "4GiB", "512MiB", bytes
};

// Adds the model/input/device flags shared by run, check and bench.
void add_model_options(CLI::App& app, ModelOptions& options);

// A model with its inputs, ready to run.
struct PreparedRun {
  std::shared_ptr<const Model> model;  // as imported
  std::vector<Tensor> inputs;     // the session's inputs, in order
  std::map<std::string, Tensor> all_inputs;  // every model input by name (for the reference)
  SessionOptions session_options;
  std::unique_ptr<Session> session;
};

// Imports the model, loads or generates the inputs, and creates the session. When the
// model path is a folder in the ONNX test layout, `model_file` is its model.onnx.
Result<PreparedRun> prepare_run(const ModelOptions& options, const std::string& model_file,
                                const std::string& inputs_dir);

// Reads input_<i>.pb / input_<i>.npy (or output_<i>) from an ONNX test-layout folder.
Result<std::vector<Tensor>> read_numbered_tensors(const std::string& dir, const std::string& prefix,
                                                  size_t count);

// Writes `text` to `path`; `what` names the option in the error ("--json").
Status write_text_file(const std::string& path, const std::string& text, const char* what);

// "min -1.2 max 3.4 mean 0.01 std 0.98" (exact integers for integer tensors).
std::string tensor_statistics(const Tensor& tensor);

}  // namespace strider::cli
