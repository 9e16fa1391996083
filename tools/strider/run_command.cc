// `strider run`: run a model once and print (and optionally write) its outputs.
#include <fmt/format.h>

#include <filesystem>

#include "cli_common.h"
#include "commands.h"
#include "onnx/npy.h"
#include "onnx/tensor_proto.h"

namespace strider::cli {
namespace fs = std::filesystem;

namespace {

// Writes every output as output_<i>.npy and output_<i>.pb. Each file goes to a temporary
// name first and all are renamed at the end, so a failure leaves no half-written set.
Status write_outputs(const std::string& dir, const std::vector<ValueInfo>& infos, const std::vector<Tensor>& outputs) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return io_error(fmt::format("cannot create --output-dir '{}': {}", dir, ec.message()));
  std::vector<std::pair<std::string, std::string>> renames;
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::string base = fmt::format("{}/output_{}", dir, i);
    STRIDER_RETURN_IF_ERROR(write_npy(base + ".npy.partial", outputs[i]));
    STRIDER_RETURN_IF_ERROR(write_tensor_pb(base + ".pb.partial", outputs[i], infos[i].name));
    renames.emplace_back(base + ".npy.partial", base + ".npy");
    renames.emplace_back(base + ".pb.partial", base + ".pb");
  }
  for (const auto& [from, to] : renames) {
    fs::rename(from, to, ec);
    if (ec) return io_error(fmt::format("cannot write '{}': {}", to, ec.message()));
  }
  return Status::ok();
}

}  // namespace

void add_run_command(CLI::App& app, RunOptions& options) {
  CLI::App* run = app.add_subcommand("run", "run a model and print its outputs");
  add_model_options(*run, options.model);
  run->add_option("--output-dir", options.output_dir, "write output_<i>.npy and output_<i>.pb here");
  run->footer(
      "Examples:\n"
      "  strider run model.onnx                      # seeded random inputs\n"
      "  strider run model.onnx --input images=img.npy --output-dir out/\n"
      "  strider run model.onnx --inputs-dir test_data_set_0 --dtype bf16\n"
      "  strider run model.onnx --random-inputs --shape images:1x3x320x320");
  run->callback([&options] { options.selected = true; });
}

int run_command(const RunOptions& options) {
  auto prepared = prepare_run(options.model, options.model.model, options.model.inputs_dir);
  if (!prepared.is_ok()) return report_error(prepared.status());
  auto outputs = prepared->session->run(prepared->inputs);
  if (!outputs.is_ok()) return report_error(outputs.status());
  const auto& infos = prepared->session->outputs();
  for (size_t i = 0; i < outputs->size(); ++i) {
    const Tensor& t = (*outputs)[i];
    fmt::print("output '{}' {}{}: {}\n", infos[i].name, dtype_name(t.dtype()), shape_to_string(t.shape()),
               tensor_statistics(t));
  }
  if (!options.output_dir.empty()) {
    Status written = write_outputs(options.output_dir, infos, *outputs);
    if (!written.is_ok()) return report_error(written);
  }
  return kExitOk;
}

}  // namespace strider::cli
