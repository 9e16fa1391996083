#include "http_server.h"

#include <fmt/format.h>
#include <httplib.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <charconv>
#include <chrono>
#include <iostream>
#include <thread>

#include "kserve_protocol.h"
#include "strider/tools.h"

namespace strider::serve {
namespace {

using nlohmann::json;
using httplib::Request;
using httplib::Response;

// Model routes: /v2/models/{m}, optionally /versions/{v}, then a suffix.
const std::string kModel = R"(/v2/models/([^/]+)(?:/versions/([^/]+))?)";

void send_json(Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

void send_error(Response& res, int status, const std::string& message) { send_json(res, status, {{"error", message}}); }

// The HTTP status of a failed request.
int http_status(const Status& status) {
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kOutOfRange:
    case StatusCode::kUnsupported: return 400;
    case StatusCode::kResourceExhausted: return 503;
    default: return 500;
  }
}

// cpp-httplib serves a connection on one pool thread for as long as it stays open, and a
// thread mostly waits (for the client, the batcher, the device): the pool is sized for
// many clients, not for the cores. Clients beyond it wait for a thread.
constexpr int kDefaultHttpThreads = 256;

// The library's defaults (address reuse) plus TCP_NODELAY, which accepted sockets inherit:
// without it a small response waited for the client's delayed ACK (one 224x224 image took
// 48 ms a request from one client, 6 ms each from eight).
void no_delay_socket(socket_t socket) {
  int yes = 1;
  setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  setsockopt(socket, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
}

std::string server_version() {
  const std::string text = version_text();
  const std::string first = text.substr(0, text.find('\n'));  // "strider 0.1.0 (commit ...)"
  const size_t space = first.find(' ');
  return space == std::string::npos ? first : first.substr(space + 1, first.find(' ', space + 1) - space - 1);
}

json model_metadata(const ServedModel& m) {
  json inputs = json::array(), outputs = json::array();
  for (const ValueInfo& v : m.inputs()) inputs.push_back(tensor_metadata(v));
  for (const ValueInfo& v : m.outputs()) outputs.push_back(tensor_metadata(v));
  return {{"name", m.name}, {"versions", {m.version}}, {"platform", "onnx"}, {"inputs", inputs}, {"outputs", outputs}};
}

json triton_config(const ServedModel& m) {
  auto values = [](const std::vector<ValueInfo>& list) {
    json out = json::array();
    for (const ValueInfo& v : list) out.push_back({{"name", v.name}, {"data_type", triton_config_datatype(v.dtype)}, {"dims", v.shape}});
    return out;
  };
  const bool gpu = m.options().device.rfind("cuda", 0) == 0;
  return {{"name", m.name},
          {"platform", "onnxruntime_onnx"},  // what Triton's tools expect of an ONNX model
          {"backend", "strider"},
          {"max_batch_size", 0},
          {"input", values(m.inputs())},
          {"output", values(m.outputs())},
          {"instance_group", {{{"count", m.options().instances}, {"kind", gpu ? "KIND_GPU" : "KIND_CPU"}}}},
          {"parameters", {{"strider_device", {{"string_value", m.options().device}}},
                          {"strider_dtype", {{"string_value", std::string(dtype_name(m.options().dtype))}}}}}};
}

json model_statistics(ServedModel& m) {
  ModelStats& s = m.stats();
  auto pair = [](int64_t count, int64_t ns) { return json{{"count", count}, {"ns", ns}}; };
  const int64_t executions = m.executions(), requests = s.success + s.failure;
  return {{"name", m.name},
          {"version", m.version},
          {"last_inference", s.last_inference_ms.load()},
          {"inference_count", s.inferences.load()},
          {"execution_count", executions},
          {"inference_stats", {{"success", pair(s.success, s.success_ns)},
                               {"fail", pair(s.failure, s.failure_ns)},
                               {"queue", pair(requests, s.queue_ns)},
                               {"compute_input", pair(0, 0)},
                               {"compute_infer", pair(requests, s.compute_ns)},
                               {"compute_output", pair(0, 0)}}},
          {"batch_stats", json::array()}};
}

// The merged batches' sizes, for the models that batch.
std::string batch_size_histogram(const ModelRepository& repository) {
  std::string text = "# HELP strider_batch_size Rows of each batch a model ran\n# TYPE strider_batch_size histogram\n";
  for (const auto& m : repository.models()) {
    if (!m->batcher()) continue;
    const BatchStats& b = m->batcher()->stats();
    const std::string labels = fmt::format("model=\"{}\",version=\"{}\"", m->name, m->version);
    int64_t cumulative = 0;
    for (int k = 0; k < 8; ++k) {
      cumulative += b.by_size[k];
      const std::string le = k < 7 ? std::to_string(1 << k) : "+Inf";
      text += fmt::format("strider_batch_size_bucket{{{},le=\"{}\"}} {}\n", labels, le, cumulative);
    }
    text += fmt::format("strider_batch_size_sum{{{}}} {}\nstrider_batch_size_count{{{}}} {}\n", labels, b.rows.load(),
                        labels, b.batches.load());
  }
  return text;
}

// Prometheus text under Triton's metric names, so its dashboards read it.
std::string prometheus_metrics(const ModelRepository& repository) {
  struct Metric { const char* name; const char* type; const char* help; int64_t (*value)(ServedModel&); };
  static const Metric kMetrics[] = {
      {"nv_inference_request_success", "counter", "Successful inference requests",
       [](ServedModel& m) -> int64_t { return m.stats().success; }},
      {"nv_inference_request_failure", "counter", "Failed inference requests",
       [](ServedModel& m) -> int64_t { return m.stats().failure; }},
      {"nv_inference_count", "counter", "Inferences performed (a batch of n counts n)",
       [](ServedModel& m) -> int64_t { return m.stats().inferences; }},
      {"nv_inference_exec_count", "counter", "Model executions (runs)",
       [](ServedModel& m) -> int64_t { return m.executions(); }},
      {"nv_inference_request_duration_us", "counter", "Cumulative request time, received to answered",
       [](ServedModel& m) -> int64_t { return (m.stats().success_ns + m.stats().failure_ns) / 1000; }},
      {"nv_inference_queue_duration_us", "counter", "Cumulative time requests waited for an instance",
       [](ServedModel& m) -> int64_t { return m.stats().queue_ns / 1000; }},
      {"nv_inference_compute_infer_duration_us", "counter", "Cumulative time of the model's runs",
       [](ServedModel& m) -> int64_t { return m.stats().compute_ns / 1000; }},
      {"strider_model_ready", "gauge", "1 when the model is loaded and warmed",
       [](ServedModel& m) -> int64_t { return m.ready() ? 1 : 0; }},
  };
  std::string text;
  for (const Metric& metric : kMetrics) {
    text += fmt::format("# HELP {} {}\n# TYPE {} {}\n", metric.name, metric.help, metric.name, metric.type);
    for (const auto& m : repository.models())
      text += fmt::format("{}{{model=\"{}\",version=\"{}\"}} {}\n", metric.name, m->name, m->version, metric.value(*m));
  }
  return text + batch_size_histogram(repository);
}

// The model a route names, or null after answering 404.
ServedModel* find_model(ModelRepository& repository, const Request& req, Response& res) {
  ServedModel* model = repository.find(req.matches[1]);
  if (!model) {
    send_error(res, 404, fmt::format("unknown model '{}'", std::string(req.matches[1])));
    return nullptr;
  }
  const std::string version = req.matches.size() > 2 ? std::string(req.matches[2]) : "";
  if (!version.empty() && version != model->version) {
    send_error(res, 404, fmt::format("model '{}' has no version '{}' (it serves version {})", model->name, version, model->version));
    return nullptr;
  }
  return model;
}

std::optional<size_t> parse_size(const std::string& text) {
  size_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// POST .../infer: the whole request, answered with the outputs or the error.
void infer(ServedModel& model, const Request& req, Response& res) {
  const int64_t start = steady_now_ns();
  auto fail = [&](int status, const std::string& message) {
    model.record(false, start);
    send_error(res, status, message);
  };
  if (!model.ready()) return fail(503, fmt::format("model '{}' is not ready: {}", model.name, model.error));
  std::optional<size_t> header_length;
  if (req.has_header("Inference-Header-Content-Length")) {
    header_length = parse_size(req.get_header_value("Inference-Header-Content-Length"));
    if (!header_length) return fail(400, "Inference-Header-Content-Length is not a byte count");
  }
  Result<InferRequest> request = parse_infer_request(req.body, header_length, model.inputs());
  if (!request.is_ok()) return fail(400, request.status().message());
  RequestLimits limits;  // cpp-httplib cannot tell a handler that its client left
  if (request->timeout_us) limits.deadline = Clock::now() + std::chrono::microseconds(*request->timeout_us);
  Result<std::vector<Tensor>> outputs = model.infer(std::move(request->inputs), limits);
  if (!outputs.is_ok()) return fail(http_status(outputs.status()), outputs.status().message());
  Result<InferResponse> response = make_infer_response(model.name, model.version, *request, model.outputs(), *outputs);
  if (!response.is_ok()) return fail(400, response.status().message());
  if (response->header_length) res.set_header("Inference-Header-Content-Length", std::to_string(*response->header_length));
  res.set_content(std::move(response->body), response->header_length ? "application/octet-stream" : "application/json");
  model.record(true, start);
}

}  // namespace

void log_json(const std::string& level, const std::string& message, const json& fields) {
  json line = fields;
  line["time"] = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  line["level"] = level;
  line["message"] = message;
  std::cerr << line.dump() + "\n" << std::flush;
}

HttpServer::HttpServer(ModelRepository& repository, HttpOptions options)
    : repository_(repository), options_(std::move(options)), server_(std::make_unique<httplib::Server>()) {
  const int threads = options_.threads > 0 ? options_.threads : kDefaultHttpThreads;
  server_->new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
  server_->set_payload_max_length(options_.max_body_bytes);
  // A connection keeps its thread while it is open: keep clients' connections (reconnecting
  // every 5 requests, the library's default, queued them behind the others).
  server_->set_keep_alive_max_count(100000);
  server_->set_socket_options(no_delay_socket);
  add_routes();
}

HttpServer::~HttpServer() = default;

void HttpServer::add_routes() {
  httplib::Server& s = *server_;
  s.Get("/v2/health/live", [](const Request&, Response& res) { res.status = 200; });
  s.Get("/v2/health/ready", [this](const Request&, Response& res) { res.status = repository_.ready() ? 200 : 503; });
  s.Get("/v2", [](const Request&, Response& res) {
    send_json(res, 200, {{"name", "strider"}, {"version", server_version()},
                         {"extensions", {"binary_tensor_data", "statistics", "model_configuration"}}});
  });
  s.Get("/metrics", [this](const Request&, Response& res) {
    res.set_content(prometheus_metrics(repository_), "text/plain; version=0.0.4");
  });
  s.Get("/v2/models/stats", [this](const Request&, Response& res) {
    json stats = json::array();
    for (const auto& m : repository_.models()) stats.push_back(model_statistics(*m));
    send_json(res, 200, {{"model_stats", stats}});
  });
  s.Get(kModel + "/stats", [this](const Request& req, Response& res) {
    if (ServedModel* m = find_model(repository_, req, res)) send_json(res, 200, {{"model_stats", {model_statistics(*m)}}});
  });
  s.Get(kModel + "/ready", [this](const Request& req, Response& res) {
    if (ServedModel* m = find_model(repository_, req, res)) res.status = m->ready() ? 200 : 503;
  });
  s.Get(kModel + "/config", [this](const Request& req, Response& res) {
    ServedModel* m = find_model(repository_, req, res);
    if (m && !m->ready()) send_error(res, 503, fmt::format("model '{}' is not ready: {}", m->name, m->error));
    else if (m) send_json(res, 200, triton_config(*m));
  });
  s.Get(kModel, [this](const Request& req, Response& res) {
    ServedModel* m = find_model(repository_, req, res);
    if (m && !m->ready()) send_error(res, 503, fmt::format("model '{}' is not ready: {}", m->name, m->error));
    else if (m) send_json(res, 200, model_metadata(*m));
  });
  s.Post(kModel + "/infer", [this](const Request& req, Response& res) {
    ServedModel* m = find_model(repository_, req, res);
    if (m) infer(*m, req, res);
    if (options_.log_requests)
      log_json(res.status < 400 ? "info" : "warning", "infer",
               {{"model", std::string(req.matches[1])}, {"status", res.status}, {"bytes_in", req.body.size()}});
  });
  // Unknown paths, and the library's own answers (413 for a body over the limit), as JSON.
  s.set_error_handler([](const Request& req, Response& res) {
    if (res.body.empty())
      send_error(res, res.status, res.status == 413 ? "the request body is over the server's limit"
                                                    : fmt::format("no route for {} {}", req.method, req.path));
  });
  s.set_exception_handler([](const Request&, Response& res, std::exception_ptr) {
    send_error(res, 500, "internal error while answering the request");
  });
}

Result<int> HttpServer::bind() {
  const int port = options_.port == 0 ? server_->bind_to_any_port(options_.host)
                                      : (server_->bind_to_port(options_.host, options_.port) ? options_.port : -1);
  if (port < 0) return io_error(fmt::format("cannot listen on {}:{}", options_.host, options_.port));
  return port;
}

Status HttpServer::listen() {
  if (!server_->listen_after_bind()) return io_error("the HTTP server stopped with an error");
  return Status::ok();
}

void HttpServer::stop() { server_->stop(); }

}  // namespace strider::serve
