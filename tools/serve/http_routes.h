// The Open Inference Protocol's HTTP/REST routes as a function of a request, free of any
// HTTP library: http_server.cc is the transport (Boost.Beast) that reads requests off
// sockets and writes the replies. Routes, statuses and bodies are listed in http_server.h.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model_repository.h"

namespace strider::serve {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // without the query
  std::string body;
  std::optional<std::string> header_length;  // Inference-Header-Content-Length, when sent
  std::function<bool()> client_gone;          // the transport's test, may be empty
};

struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

// Answers one request. Never throws for anything a client sends.
HttpReply route(ModelRepository& repository, const HttpRequest& request, bool log_requests);
// The protocol's error reply: {"error": message}.
HttpReply error_reply(int status, const std::string& message);

}  // namespace strider::serve
