// `strider serve`'s HTTP/REST front end (grpc_server.h is the gRPC one): the Open Inference Protocol (KServe v2) over a
// ModelRepository, with Triton's extensions that its tools use.
//
//   GET  /v2/health/live                  200 while the process serves
//   GET  /v2/health/ready                 200 once loading is over and a model is ready, else 503
//   GET  /v2                              server metadata
//   GET  /v2/models/{m}[/versions/{v}]    model metadata (shapes with -1 for open dims)
//   GET  /v2/models/{m}[/versions/{v}]/ready
//   POST /v2/models/{m}[/versions/{v}]/infer   JSON, or the binary tensor data extension
//   GET  /v2/models/{m}/config            Triton's model configuration
//   GET  /v2/models/stats, /v2/models/{m}/stats   Triton's statistics extension
//   GET  /metrics                         Prometheus text, Triton's metric names
//   /v2/systemsharedmemory/...            Triton's system shared memory (shared_memory.h)
//
// Errors are the protocol's {"error": "..."}: 400 for a bad request (malformed JSON, an
// unknown input, a wrong shape or datatype), 404 for an unknown model, version or path,
// 413 for a body over the limit, 503 when the model is not ready or its queue is full,
// 500 when a run fails on the device. Nothing a client sends can crash the server.
//
// Transport: Boost.Beast, a thread per open connection, at most `threads` open at once (the
// next client waits to be accepted); an idle connection closes after 5 s; requests for one
// model run on its instances (model_repository.h). The routes themselves are
// http_routes.h, free of the transport. stop() (any thread, e.g. on SIGTERM) stops
// accepting, lets the requests in flight finish, and makes listen() return.
#pragma once

#include <memory>
#include <string>

#include "model_repository.h"

namespace strider::serve {

struct HttpOptions {
  std::string host = "0.0.0.0";
  int port = 8080;  // 0: any free port (bound() says which)
  int threads = 0;  // connections open at once (a thread each); 0: 256
  size_t max_body_bytes = size_t(256) << 20;
  bool log_requests = false;  // one JSON line per request on stderr
};

class HttpServer {
 public:
  HttpServer(ModelRepository& repository, HttpOptions options);
  ~HttpServer();
  // Binds the port; returns it (the one chosen for port 0).
  Result<int> bind();
  // Serves until stop(). Call bind() first.
  Status listen();
  void stop();

 private:
  struct Impl;
  HttpOptions options_;
  std::unique_ptr<Impl> impl_;
};

// One structured log line on stderr: {"time": ..., "level": ..., "message": ..., fields}.
void log_json(const std::string& level, const std::string& message, const nlohmann::json& fields = nlohmann::json::object());

}  // namespace strider::serve
