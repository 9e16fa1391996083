// The other HTTP front end issue 16 names, measured against cpp-httplib's: a Boost.Beast
// server of the same shape (a thread per connection, keep-alive) answering only
// POST /v2/models/{m}/infer with the same parsing, model and response code
// (tools/serve), so that hey against both isolates the front end.
//   serve_beast_probe NAME=MODEL.onnx PORT      then hey ... http://127.0.0.1:PORT/v2/models/NAME/infer
#include <utility>  // before Boost 1.74: its asio/awaitable.hpp uses std::exchange without it (C++20)

#include <boost/asio.hpp>
#include <boost/beast.hpp>

#include <cstdio>
#include <iostream>
#include <thread>

#include "kserve_protocol.h"
#include "model_repository.h"

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;
using namespace strider;

namespace {

http::response<http::string_body> answer(serve::ModelRepository& repository, const http::request<http::string_body>& req) {
  http::response<http::string_body> res{http::status::ok, req.version()};
  res.keep_alive(req.keep_alive());
  auto fail = [&](http::status status, const std::string& message) {
    res.result(status);
    res.set(http::field::content_type, "application/json");
    res.body() = nlohmann::json{{"error", message}}.dump();
    res.prepare_payload();
    return res;
  };
  const std::string target(req.target());
  const std::string prefix = "/v2/models/", suffix = "/infer";
  if (req.method() != http::verb::post || target.rfind(prefix, 0) != 0 || target.size() <= prefix.size() + suffix.size() ||
      target.compare(target.size() - suffix.size(), suffix.size(), suffix) != 0)
    return fail(http::status::not_found, "no route");
  serve::ServedModel* model = repository.find(target.substr(prefix.size(), target.size() - prefix.size() - suffix.size()));
  if (!model) return fail(http::status::not_found, "unknown model");
  std::optional<size_t> header_length;
  if (auto h = req.find("Inference-Header-Content-Length"); h != req.end()) header_length = std::stoul(std::string(h->value()));
  auto request = serve::parse_infer_request(req.body(), header_length, model->inputs());
  if (!request.is_ok()) return fail(http::status::bad_request, request.status().message());
  auto outputs = model->infer(std::move(request->inputs));
  if (!outputs.is_ok()) return fail(http::status::internal_server_error, outputs.status().message());
  auto response = serve::make_infer_response(model->name, model->version, *request, model->outputs(), *outputs);
  if (!response.is_ok()) return fail(http::status::bad_request, response.status().message());
  if (response->header_length) res.set("Inference-Header-Content-Length", std::to_string(*response->header_length));
  res.set(http::field::content_type, response->header_length ? "application/octet-stream" : "application/json");
  res.body() = std::move(response->body);
  res.prepare_payload();
  return res;
}

void serve_connection(tcp::socket socket, serve::ModelRepository& repository) {
  beast::flat_buffer buffer;
  beast::error_code error;
  socket.set_option(tcp::no_delay(true));
  while (true) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(256 << 20);
    http::read(socket, buffer, parser, error);
    if (error) break;
    auto res = answer(repository, parser.get());
    http::write(socket, res, error);
    if (error || !res.keep_alive()) break;
  }
  socket.shutdown(tcp::socket::shutdown_send, error);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: serve_beast_probe NAME=MODEL.onnx PORT\n");
    return 2;
  }
  const std::string pair = argv[1];
  serve::ModelRepository repository;
  serve::ModelDefaults defaults;
  Status loaded = repository.load_model(pair.substr(0, pair.find('=')), pair.substr(pair.find('=') + 1), defaults);
  if (!loaded.is_ok() || !repository.ready()) {
    std::fprintf(stderr, "the model did not load\n");
    return 1;
  }
  boost::asio::io_context io;
  tcp::acceptor acceptor(io, {boost::asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(std::atoi(argv[2]))});
  std::fprintf(stderr, "serving on %d\n", int(acceptor.local_endpoint().port()));
  while (true) {
    tcp::socket socket(io);
    acceptor.accept(socket);
    std::thread(serve_connection, std::move(socket), std::ref(repository)).detach();
  }
}
