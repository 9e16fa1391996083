// The HTTP transport: Boost.Beast, a thread per open connection (at most `threads`), each
// reading requests and writing http_routes.h's replies until the client closes, goes idle
// for kIdleSeconds, or the server stops. Measured against cpp-httplib's server of the same
// shape on a 75-us model: 1.17-1.29x the requests per second (bench/RESULTS.md).
#include "http_server.h"

#include <utility>  // before Boost 1.74: its asio/awaitable.hpp uses std::exchange without it (C++20)

#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <fmt/format.h>
#include <sys/socket.h>

#include <cerrno>
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <set>
#include <thread>

#include "http_routes.h"

namespace strider::serve {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;

// A connection holds its thread while open, and a thread mostly waits (for the client, the
// batcher, the device): the limit is sized for many clients, not for the cores.
constexpr int kDefaultConnections = 256;
// An idle keep-alive connection is closed after this, so it does not hold a thread for ever.
constexpr int kIdleSeconds = 5;

// Whether the client closed its side of the connection (a request waiting in a queue is then
// dropped unrun): a peek that finds the end of the stream, or an error other than "nothing
// to read yet". A client that half-closes after sending and still waits for its reply (rare
// for HTTP clients) reads as gone too.
bool peer_closed(int fd) {
  char byte = 0;
  const ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

http::response<http::string_body> to_response(HttpReply reply, unsigned version, bool keep_alive) {
  http::response<http::string_body> res{static_cast<http::status>(reply.status), version};
  res.set(http::field::server, "strider");
  res.set(http::field::content_type, reply.content_type);
  for (auto& [name, value] : reply.headers) res.set(name, value);
  res.keep_alive(keep_alive);
  res.body() = std::move(reply.body);
  res.prepare_payload();
  return res;
}

}  // namespace

void log_json(const std::string& level, const std::string& message, const nlohmann::json& fields) {
  nlohmann::json line = fields;
  line["time"] = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  line["level"] = level;
  line["message"] = message;
  std::cerr << line.dump() + "\n" << std::flush;
}

struct HttpServer::Impl {
  Impl(ModelRepository& repository, const HttpOptions& options) : repository(repository), options(options) {}
  // One connection, on its own thread; then finished(), after the socket is gone (a socket
  // refers to `io`, which goes with the server once the last connection has finished).
  void serve(tcp::socket& socket);
  void finished();
  ModelRepository& repository;
  const HttpOptions& options;
  boost::asio::io_context io;
  std::optional<tcp::acceptor> acceptor;
  std::mutex mutex;
  std::condition_variable changed;
  int active = 0;
  bool stopping = false;
  std::set<tcp::socket*> sockets;  // the open connections, unblocked by stop()
};

HttpServer::HttpServer(ModelRepository& repository, HttpOptions options)
    : options_(std::move(options)) {
  if (options_.threads <= 0) options_.threads = kDefaultConnections;
  impl_ = std::make_unique<Impl>(repository, options_);
}

HttpServer::~HttpServer() = default;

Result<int> HttpServer::bind() {
  boost::system::error_code error;
  const auto address = boost::asio::ip::make_address(options_.host, error);
  if (error) return invalid_argument(fmt::format("'{}' is not an address to listen on", options_.host));
  tcp::endpoint endpoint(address, static_cast<unsigned short>(options_.port));
  tcp::acceptor& acceptor = impl_->acceptor.emplace(impl_->io);
  acceptor.open(endpoint.protocol(), error);
  if (!error) acceptor.set_option(tcp::acceptor::reuse_address(true), error);
  if (!error) acceptor.bind(endpoint, error);
  if (!error) acceptor.listen(boost::asio::socket_base::max_listen_connections, error);
  if (error) return io_error(fmt::format("cannot listen on {}:{}: {}", options_.host, options_.port, error.message()));
  return int(acceptor.local_endpoint().port());
}

Status HttpServer::listen() {
  if (!impl_->acceptor) return internal_error("listen() before bind()");
  while (true) {
    {
      std::unique_lock lock(impl_->mutex);  // a thread for the next connection
      impl_->changed.wait(lock, [&] { return impl_->stopping || impl_->active < options_.threads; });
      if (impl_->stopping) break;
    }
    auto socket = std::make_unique<tcp::socket>(impl_->io);
    boost::system::error_code error;
    impl_->acceptor->accept(*socket, error);
    std::lock_guard lock(impl_->mutex);
    if (impl_->stopping) break;
    if (error) continue;  // a connection that failed before it was accepted
    ++impl_->active;
    std::thread([impl = impl_.get(), s = std::move(socket)]() mutable {
      impl->serve(*s);
      s.reset();
      impl->finished();
    }).detach();
  }
  std::unique_lock lock(impl_->mutex);  // stopped: the requests in flight finish
  impl_->changed.wait(lock, [&] { return impl_->active == 0; });
  return Status::ok();
}

void HttpServer::Impl::serve(tcp::socket& socket) {
  {
    std::lock_guard lock(mutex);
    sockets.insert(&socket);
    if (stopping) ::shutdown(socket.native_handle(), SHUT_RD);
  }
  boost::system::error_code error;
  socket.set_option(tcp::no_delay(true), error);  // a small reply never waits for the client's delayed ACK
  timeval idle{kIdleSeconds, 0};
  setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &idle, sizeof(idle));
  beast::flat_buffer buffer;
  while (true) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(options.max_body_bytes);
    http::read(socket, buffer, parser, error);
    if (error == http::error::body_limit) {
      http::write(socket, to_response(error_reply(413, "the request body is over the server's limit"), 11, false), error);
      break;
    }
    if (error) break;  // closed, idle, stopping, or not HTTP
    http::request<http::string_body>& req = parser.get();
    HttpRequest request;
    request.method = std::string(req.method_string());
    const std::string target(req.target());
    request.path = std::string(target.substr(0, target.find('?')));
    if (auto h = req.find("Inference-Header-Content-Length"); h != req.end()) request.header_length = std::string(h->value());
    request.body = std::move(req.body());
    request.client_gone = [fd = socket.native_handle()] { return peer_closed(fd); };
    HttpReply reply;
    try {
      reply = route(repository, request, options.log_requests);
    } catch (const std::exception& e) {  // a dependency's exception (bad_alloc...): the client gets a 500
      reply = error_reply(500, std::string("internal error while answering the request: ") + e.what());
    }
    bool keep_alive = req.keep_alive();
    {
      std::lock_guard lock(mutex);
      keep_alive = keep_alive && !stopping;
    }
    http::write(socket, to_response(std::move(reply), req.version(), keep_alive), error);
    if (error || !keep_alive) break;
  }
  std::lock_guard lock(mutex);
  sockets.erase(&socket);
  socket.shutdown(tcp::socket::shutdown_both, error);
  socket.close(error);
}

void HttpServer::Impl::finished() {
  std::lock_guard lock(mutex);
  --active;
  changed.notify_all();
}

void HttpServer::stop() {
  std::lock_guard lock(impl_->mutex);
  impl_->stopping = true;
  // Wakes the accept() and every read waiting for a next request; a request being answered
  // still gets its reply (only the receiving side is shut).
  if (impl_->acceptor) ::shutdown(impl_->acceptor->native_handle(), SHUT_RDWR);
  for (tcp::socket* socket : impl_->sockets) ::shutdown(socket->native_handle(), SHUT_RD);
  impl_->changed.notify_all();
}

}  // namespace strider::serve
