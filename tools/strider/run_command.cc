// `strider run`: run a model once and print (and optionally write) its outputs.
#include <fmt/format.h>

#include <filesystem>

#include "cli_common.h"
#include "commands.h"
#include "strider/tensor_file.h"

namespace strider::cli {
namespace fs = std::filesystem;

namespace {

// Writes every output as output_<i>.npy and output_<i>.pb, all or nothing: each file goes
// to a temporary name first; only when all are written are they renamed, and if any
// write or rename fails, every temporary and every file already renamed is removed, so
// the folder never holds part of a set.
Status write_outputs(const std::string& dir, const std::vector<ValueInfo>& infos, const std::vector<Tensor>& outputs) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return io_error(fmt::format("cannot create --output-dir '{}': {}", dir, ec.message()));
  std::vector<std::pair<std::string, std::string>> files;  // temporary, final
  for (size_t i = 0; i < outputs.size(); ++i)
    for (const char* ext : {".npy", ".pb"}) {
      // The temporary keeps the extension: write_tensor_file picks the format by it.
      files.emplace_back(fmt::format("{}/output_{}.partial{}", dir, i, ext), fmt::format("{}/output_{}{}", dir, i, ext));
    }
  auto undo = [&](size_t renamed, Status why) {
    for (size_t k = 0; k < files.size(); ++k) fs::remove(k < renamed ? files[k].second : files[k].first, ec);
    return why;
  };
  for (size_t i = 0; i < outputs.size(); ++i) {
    Status npy = write_tensor_file(files[2 * i].first, outputs[i], infos[i].name);
    if (!npy.is_ok()) return undo(0, npy);
    Status pb = write_tensor_file(files[2 * i + 1].first, outputs[i], infos[i].name);
    if (!pb.is_ok()) return undo(0, pb);
  }
  for (size_t k = 0; k < files.size(); ++k) {
    fs::rename(files[k].first, files[k].second, ec);
    if (ec) return undo(k, io_error(fmt::format("cannot write '{}': {}", files[k].second, ec.message())));
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
