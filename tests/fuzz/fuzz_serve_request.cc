// libFuzzer target: any bytes as a request to `strider serve`'s HTTP routes (route() in
// tools/serve/http_routes.h, the function the Beast transport calls for every request), over
// a repository of one small CNN served twice, unbatched and through the dynamic batcher
// (served_cnn.h). The bytes are the request body; the first byte picks the route and whether an
// Inference-Header-Content-Length header is sent (and from the next two bytes, its value).
//
// The rule, the server's own (issue 16): a bad request gets a 4xx with the protocol's
// {"error": "..."} body, a good one a 200, and nothing a client sends is a 500 (INTERNAL:
// the run itself failing, which the request must not be able to cause), a crash, a hang
// or unbounded memory. The shared-memory routes are left out: they open named operating
// system objects.
#include <cstdio>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "http_routes.h"
#include "served_cnn.h"

namespace {

using strider::serve::HttpReply;
using strider::serve::HttpRequest;

// Route selector (low 3 bits of the first byte) -> method and path.
HttpRequest request_for(uint8_t selector) {
  static const char* const kRoutes[][2] = {
      {"POST", "/v2/models/cnn/infer"},  {"POST", "/v2/models/cnnb/infer"}, {"POST", "/v2/models/cnn/versions/1/infer"},
      {"GET", "/v2/models/cnn"},         {"GET", "/v2/models/cnnb/config"}, {"GET", "/v2/models/stats"},
      {"POST", "/v2/models/nope/infer"}, {"GET", "/v2/health/ready"},
  };
  HttpRequest request;
  request.method = kRoutes[selector & 7][0];
  request.path = kRoutes[selector & 7][1];
  return request;
}

[[noreturn]] void broken(const HttpReply& reply, const char* why) {
  std::fprintf(stderr, "fuzz_serve_request: %s: status %d, body %.400s\n", why, reply.status, reply.body.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  HttpRequest request = request_for(data[0]);
  size_t at = 1;
  if (data[0] & 0x10) {  // a header length: the next two bytes, or text when bit 5 is set too
    if (size < 3) return 0;
    const unsigned value = unsigned(data[1]) | unsigned(data[2]) << 8;
    request.header_length = (data[0] & 0x20) ? std::string(1, char(data[1])) : std::to_string(value);
    at = 3;
  }
  request.body.assign(reinterpret_cast<const char*>(data) + at, size - at);
  const HttpReply reply = strider::serve::route(strider::fuzz::served_cnn(), request, /*log_requests=*/false);
  if (reply.status == 200) return 0;
  if (reply.status >= 500 && reply.status != 503) broken(reply, "a server error for a client's request");
  if (reply.status < 400) broken(reply, "an unexpected status");
  const nlohmann::json body = nlohmann::json::parse(reply.body, nullptr, /*allow_exceptions=*/false);
  if (!body.is_object() || !body.contains("error") || !body["error"].is_string() ||
      body["error"].get<std::string>().empty())
    broken(reply, "an error without the protocol's {\"error\": message} body");
  return 0;
}
