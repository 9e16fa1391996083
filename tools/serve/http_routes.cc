#include "http_routes.h"

#include <fmt/format.h>

#include <charconv>
#include <chrono>

#include "http_server.h"
#include "kserve_protocol.h"
#include "strider/tools.h"

namespace strider::serve {
namespace {

using nlohmann::json;

HttpReply json_reply(int status, const json& body) {
  HttpReply reply;
  reply.status = status;
  reply.body = body.dump();
  return reply;
}

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

// Per instance, so per device: its runs (batches when the model batches), and whether it
// is in rotation (0 once its device failed).
std::string instance_metrics(const ModelRepository& repository) {
  std::string runs =
      "# HELP strider_instance_exec_count Runs of one instance of a model (batches when it batches)\n"
      "# TYPE strider_instance_exec_count counter\n";
  std::string rotation =
      "# HELP strider_instance_in_rotation 1 while the instance takes requests, 0 once its device failed\n"
      "# TYPE strider_instance_in_rotation gauge\n";
  for (const auto& m : repository.models())
    for (const ServedModel::InstanceState& s : m->instance_states()) {
      const std::string labels =
          fmt::format("model=\"{}\",version=\"{}\",device=\"{}\",instance=\"{}\"", m->name, m->version, s.device, s.index);
      runs += fmt::format("strider_instance_exec_count{{{}}} {}\n", labels, s.executions);
      rotation += fmt::format("strider_instance_in_rotation{{{}}} {}\n", labels, s.in_rotation ? 1 : 0);
    }
  return runs + rotation;
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
      {"strider_device_memory_bytes", "gauge", "Memory the model's instances hold on their device (host memory on cpu)",
       [](ServedModel& m) -> int64_t { return m.ready() ? m.device_memory_bytes() : 0; }},
      {"strider_model_ready", "gauge", "1 when the model is loaded and warmed",
       [](ServedModel& m) -> int64_t { return m.ready() ? 1 : 0; }},
  };
  std::string text;
  for (const Metric& metric : kMetrics) {
    text += fmt::format("# HELP {} {}\n# TYPE {} {}\n", metric.name, metric.help, metric.name, metric.type);
    for (const auto& m : repository.models())
      text += fmt::format("{}{{model=\"{}\",version=\"{}\"}} {}\n", metric.name, m->name, m->version, metric.value(*m));
  }
  return text + instance_metrics(repository) + batch_size_histogram(repository);
}

std::optional<size_t> parse_size(const std::string& text) {
  size_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// POST .../infer: the whole request, answered with the outputs or the error.
HttpReply infer(ServedModel& model, const HttpRequest& req, const SharedMemoryRegistry& regions) {
  const int64_t start = steady_now_ns();
  auto fail = [&](int status, const std::string& message) {
    model.record(false, start);
    return error_reply(status, message);
  };
  if (!model.ready()) return fail(503, fmt::format("model '{}' is not ready: {}", model.name, model.why_not_ready()));
  std::optional<size_t> header_length;
  if (req.header_length) {
    header_length = parse_size(*req.header_length);
    if (!header_length) return fail(400, "Inference-Header-Content-Length is not a byte count");
  }
  Result<InferRequest> request = parse_infer_request(req.body, header_length, model.inputs(), &regions);
  if (!request.is_ok()) return fail(400, request.status().message());
  RequestLimits limits;
  limits.cancelled = req.client_gone;
  if (request->timeout_us) limits.deadline = Clock::now() + std::chrono::microseconds(*request->timeout_us);
  Result<std::vector<Tensor>> outputs = model.infer(std::move(request->inputs), limits);
  if (!outputs.is_ok()) return fail(http_status(outputs.status()), outputs.status().message());
  Result<InferResponse> response = make_infer_response(model.name, model.version, *request, model.outputs(), *outputs);
  if (!response.is_ok()) return fail(400, response.status().message());
  HttpReply reply;
  if (response->header_length) {
    reply.headers.emplace_back("Inference-Header-Content-Length", std::to_string(*response->header_length));
    reply.content_type = "application/octet-stream";
  }
  reply.body = std::move(response->body);
  model.record(true, start);
  return reply;
}

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> parts;
  size_t at = 0;
  while (at < path.size()) {
    size_t next = path.find('/', at);
    if (next == std::string::npos) next = path.size();
    if (next > at) parts.push_back(path.substr(at, next - at));
    at = next + 1;
  }
  return parts;
}

// /v2/systemsharedmemory[/region/{name}]/{status|register|unregister} (shared_memory.h).
HttpReply shared_memory_route(SharedMemoryRegistry& regions, const HttpRequest& req, const std::vector<std::string>& parts) {
  const bool one = parts.size() == 5 && parts[2] == "region";
  if (!one && parts.size() != 3) return error_reply(404, fmt::format("no route for {} {}", req.method, req.path));
  const std::string action = parts.back();
  const std::optional<std::string> name = one ? std::optional<std::string>(parts[3]) : std::nullopt;
  if (req.method == "GET" && action == "status") {
    Result<json> status = regions.status(name);
    return status.is_ok() ? json_reply(200, *status) : error_reply(http_status(status.status()), status.status().message());
  }
  if (req.method != "POST") return error_reply(404, fmt::format("no route for {} {}", req.method, req.path));
  Status done = Status::ok();
  if (action == "unregister" && !name) {
    regions.unregister_all();
  } else if (action == "unregister") {
    done = regions.unregister(*name);
  } else if (action == "register" && name) {
    const json body = json::parse(req.body, nullptr, false);
    const bool sizes = body.is_object() && body.contains("byte_size") && body["byte_size"].is_number_unsigned() &&
                       (!body.contains("offset") || body["offset"].is_number_unsigned());
    if (!sizes || !body.contains("key") || !body["key"].is_string())
      return error_reply(400, "register takes {\"key\": string, \"offset\": bytes, \"byte_size\": bytes}");
    done = regions.register_region(*name, body["key"].get<std::string>(), body.value("offset", uint64_t(0)),
                                   body["byte_size"].get<uint64_t>());
  } else {
    return error_reply(404, fmt::format("no route for {} {}", req.method, req.path));
  }
  return done.is_ok() ? HttpReply{200, "application/json", "", {}} : error_reply(http_status(done), done.message());
}

// /v2/models/{m}[/versions/{v}][/action]: the model's routes.
HttpReply model_route(ModelRepository& repository, const HttpRequest& req, const std::vector<std::string>& parts) {
  ServedModel* model = repository.find(parts[2]);
  if (!model) return error_reply(404, fmt::format("unknown model '{}'", parts[2]));
  size_t at = 3;
  if (parts.size() >= 5 && parts[3] == "versions") {
    if (parts[4] != model->version)
      return error_reply(404, fmt::format("model '{}' has no version '{}' (it serves version {})", model->name, parts[4],
                                          model->version));
    at = 5;
  }
  const std::string action = parts.size() > at ? parts[at] : "";
  const bool get = req.method == "GET";
  if (parts.size() > at + 1) return error_reply(404, fmt::format("no route for {} {}", req.method, req.path));
  if (req.method == "POST" && action == "infer") return infer(*model, req, repository.shared_memory());
  if (get && action == "ready") return HttpReply{model->ready() ? 200 : 503, "application/json", "", {}};
  if (get && action == "stats" && at == 3) return json_reply(200, {{"model_stats", {model_statistics(*model)}}});
  const bool metadata = get && (action.empty() || (action == "config" && at == 3));
  if (!metadata) return error_reply(404, fmt::format("no route for {} {}", req.method, req.path));
  if (!model->ready()) return error_reply(503, fmt::format("model '{}' is not ready: {}", model->name, model->why_not_ready()));
  return json_reply(200, action.empty() ? model_metadata(*model) : triton_config(*model));
}

HttpReply server_route(ModelRepository& repository, const HttpRequest& req) {
  const std::vector<std::string> parts = split_path(req.path);
  const bool get = req.method == "GET";
  if (parts.empty() || parts[0] != "v2") {
    if (get && parts.size() == 1 && parts[0] == "metrics")
      return HttpReply{200, "text/plain; version=0.0.4", prometheus_metrics(repository), {}};
    return error_reply(404, fmt::format("no route for {} {}", req.method, req.path));
  }
  if (get && parts.size() == 1)
    return json_reply(200, {{"name", "strider"}, {"version", server_version()},
                            {"extensions", {"binary_tensor_data", "statistics", "model_configuration", "system_shared_memory"}}});
  if (get && parts.size() == 3 && parts[1] == "health") {
    if (parts[2] == "live") return HttpReply{200, "application/json", "", {}};
    if (parts[2] == "ready") return HttpReply{repository.ready() ? 200 : 503, "application/json", "", {}};
  }
  if (parts.size() >= 3 && parts[1] == "systemsharedmemory") return shared_memory_route(repository.shared_memory(), req, parts);
  if (parts.size() >= 3 && parts[1] == "models") {
    if (get && parts.size() == 3 && parts[2] == "stats") {
      json stats = json::array();
      for (const auto& m : repository.models()) stats.push_back(model_statistics(*m));
      return json_reply(200, {{"model_stats", stats}});
    }
    return model_route(repository, req, parts);
  }
  return error_reply(404, fmt::format("no route for {} {}", req.method, req.path));
}

}  // namespace

HttpReply error_reply(int status, const std::string& message) { return json_reply(status, {{"error", message}}); }

HttpReply route(ModelRepository& repository, const HttpRequest& request, bool log_requests) {
  HttpReply reply = server_route(repository, request);
  if (log_requests && request.method == "POST")
    log_json(reply.status < 400 ? "info" : "warning", "request",
             {{"path", request.path}, {"status", reply.status}, {"bytes_in", request.body.size()}});
  return reply;
}

}  // namespace strider::serve
