// `strider serve`: the Open Inference Protocol over HTTP and gRPC (tools/serve/http_server.h,
// grpc_server.h), one model repository behind both.
// SIGTERM or SIGINT stops accepting, lets the requests in flight finish and exits 0.
#include <fmt/format.h>
#include <pthread.h>

#include <atomic>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include "commands.h"
#include "grpc_server.h"
#include "http_server.h"

namespace strider::cli {
namespace {

// Blocks SIGTERM and SIGINT in this thread and every thread made after it, so that only
// the waiter below takes them (sessions' workers and the HTTP pool never see a signal).
sigset_t block_stop_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

Status load_models(const ServeOptions& options, serve::ModelRepository& repository) {
  serve::ModelDefaults defaults;
  defaults.device = options.device;
  std::optional<DType> dtype = parse_dtype(options.dtype);
  if (!dtype || (*dtype != DType::kF32 && *dtype != DType::kBF16))
    return invalid_argument("--dtype must be f32 or bf16, not '" + options.dtype + "'");
  defaults.dtype = *dtype;
  defaults.threads = options.threads;
  defaults.instances = options.instances;
  defaults.max_queue = options.max_queue;
  defaults.max_batch = options.max_batch;
  defaults.max_queue_delay = std::chrono::microseconds(options.max_queue_delay_us);
  defaults.measure_batch = options.batch_cap == "measured";
  if (!options.repository.empty()) STRIDER_RETURN_IF_ERROR(repository.load_directory(options.repository, defaults));
  for (const std::string& pair : options.models) {
    const size_t eq = pair.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == pair.size())
      return invalid_argument("--model takes NAME=PATH, not '" + pair + "'");
    STRIDER_RETURN_IF_ERROR(repository.load_model(pair.substr(0, eq), pair.substr(eq + 1), defaults));
  }
  if (repository.models().empty()) return invalid_argument("no models: give --model-repository DIR or --model NAME=PATH");
  for (const auto& m : repository.models()) {
    if (!m->ready()) {
      serve::log_json("error", "model failed to load", {{"model", m->name}, {"error", m->error}});
      continue;
    }
    nlohmann::json fields = {{"model", m->name}, {"version", m->version}, {"path", m->path},
                             {"batching", m->batcher() ? "on" : m->batching_note.empty() ? "off" : m->batching_note}};
    if (m->batcher()) {
      fields["max_batch"] = m->batcher()->max_batch();
      std::vector<double> ms;
      for (double s : m->batcher()->row_seconds()) ms.push_back(std::round(s * 1e6) / 1e3);
      fields["ms_per_row_by_batch_size"] = ms;
    }
    serve::log_json("info", "model ready", fields);
  }
  return Status::ok();
}

}  // namespace

void add_serve_command(CLI::App& app, ServeOptions& options) {
  CLI::App* serve = app.add_subcommand("serve", "serve models over the Open Inference Protocol (KServe v2 / Triton) on HTTP");
  serve->add_option("--model-repository", options.repository, "a Triton model repository: DIR/NAME/VERSION/model.onnx");
  serve->add_option("--model", options.models, "NAME=PATH of a model to serve (repeatable)");
  serve->add_option("--host", options.host, "address to listen on")->capture_default_str();
  serve->add_option("--http-port", options.http_port, "HTTP port (0: any free port, printed)")->capture_default_str();
  serve->add_option("--grpc-port", options.grpc_port, "gRPC port (0: any free port; -1: no gRPC)")->capture_default_str();
  serve->add_option("--port-file", options.port_file, "once listening, write 'http PORT' and 'grpc PORT' lines here");
  serve->add_option("--device", options.device,
                    "cpu, sim, cuda, cuda:N, cuda:all (every GPU), or a list such as cuda:0,1: each model's instances on each")
      ->capture_default_str();
  serve->add_option("--dtype", options.dtype, "f32 or bf16")->capture_default_str();
  serve->add_option("--threads", options.threads, "cpu threads per instance (0: every core)")->capture_default_str();
  serve->add_option("--instances,--instances-per-device", options.instances, "instances (sessions) of each model on each device")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  serve->add_option("--max-queue", options.max_queue, "requests per model waiting or running; more get 503")
      ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  serve->add_option("--max-batch", options.max_batch,
                    "merge requests along the batch dim up to this many rows (0 or 1: no batching)")
      ->capture_default_str()->check(CLI::Range(0, 4096));
  serve->add_option("--max-queue-delay-us", options.max_queue_delay_us,
                    "longest a request waits for others to batch with (0: greedy, batches form while the model runs)")->capture_default_str()->check(CLI::Range(0, 10000000));
  serve->add_option("--batch-cap", options.batch_cap,
                    "measured: batches stop at the size timed fastest per row at load; fixed: at --max-batch")
      ->capture_default_str()->check(CLI::IsMember({"measured", "fixed"}));
  serve->add_option("--http-threads", options.http_threads, "connections served at once (0: 256)")->capture_default_str();
  serve->add_option("--max-body-mb", options.max_body_mb, "largest request body; larger get 413")->capture_default_str();
  serve->add_flag("--log-requests", options.log_requests, "one JSON line per request on stderr");
  serve->callback([&options] { options.selected = true; });
}

int serve_command(const ServeOptions& options) {
  const sigset_t signals = block_stop_signals();
  serve::ModelRepository repository;
  if (Status loaded = load_models(options, repository); !loaded.is_ok()) return report_error(loaded);
  serve::HttpOptions http;
  http.host = options.host;
  http.port = options.http_port;
  http.threads = options.http_threads;
  http.max_body_bytes = size_t(options.max_body_mb) << 20;
  http.log_requests = options.log_requests;
  serve::HttpServer server(repository, http);
  Result<int> port = server.bind();
  if (!port.is_ok()) return report_error(port.status());
  std::unique_ptr<serve::GrpcServer> grpc;
  int grpc_port = -1;
  if (options.grpc_port >= 0) {
    grpc = std::make_unique<serve::GrpcServer>(repository, options.host, options.grpc_port, http.max_body_bytes);
    Result<int> started = grpc->start();
    if (!started.is_ok()) return report_error(started.status());
    grpc_port = *started;
  }
  // Written once both listen, so a client that reads it can connect at once.
  if (!options.port_file.empty()) {  // renamed into place: a reader never sees half of it
    std::ofstream(options.port_file + ".partial") << "http " << *port << "\ngrpc " << grpc_port << "\n";
    std::filesystem::rename(options.port_file + ".partial", options.port_file);
  }
  serve::log_json("info", "serving", {{"http", fmt::format("{}:{}", options.host, *port)},
                                      {"grpc", grpc ? fmt::format("{}:{}", options.host, grpc_port) : "off"},
                                      {"ready", repository.ready()}});
  std::atomic<bool> listening_over{false};
  std::thread waiter([&] {
    int signal = 0;
    sigwait(&signals, &signal);
    if (!listening_over) {
      serve::log_json("info", "stopping: finishing the requests in flight", {{"signal", signal}});
      server.stop();
      if (grpc) grpc->stop();
    }
  });
  Status served = server.listen();
  listening_over = true;
  pthread_kill(waiter.native_handle(), SIGTERM);  // wakes the waiter if listen() ended by itself
  waiter.join();
  if (grpc) {
    grpc->stop();
    grpc->wait();
  }
  if (!served.is_ok()) return report_error(served);
  serve::log_json("info", "stopped");
  return kExitOk;
}

}  // namespace strider::cli
