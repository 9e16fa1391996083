// A load client of `strider serve` (the Open Inference Protocol over HTTP/1.1) for
// bench/serve-load/run.py: N keep-alive connections, each on a thread of its own, sending
// one model's inference requests closed loop (each connection's next request when its last
// is answered) or open loop (Poisson arrivals at a total rate, each latency counted from
// when its request was due, so a server that falls behind is charged for the requests
// queued behind it). The request carries its image as binary tensor data
// (Inference-Header-Content-Length) or names ranges of a POSIX shared-memory region of the
// connection's own (Triton's system shared-memory extension) for its input and outputs.
//
// Why not Python: shm_load.py's open loop added about 0.4 ms to every latency (a 1000/s
// open loop's p50 0.75 ms against 0.30 ms at one closed-loop client, session 29 on the H100
// machine), more than the C2f block's whole bound of 4x its single-request latency. Here a
// connection sleeps to an absolute time with 1-ns timer slack and nothing else shares
// its thread.
//
//   serve_load_client --url 127.0.0.1:PORT --model c2f --shape 1x16x40x40 [--transport shm|binary]
//       [--connections 64] [--requests 4000] [--rate 0 (closed loop) | R requests/s] [--seed 5]
//
// Prints one JSON object: {"rate", "p50", "p99", "errors", "ok"} (requests/s over the run,
// latencies in ms), what run.py's `hey` parser returns.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

struct Options {
  std::string host = "127.0.0.1", port, model, transport = "shm";
  std::vector<int64_t> shape;
  int connections = 64;
  int64_t requests = 4000;
  double rate = 0;  // 0: closed loop
  uint64_t seed = 5;
};

std::vector<int64_t> parse_shape(const std::string& text) {
  std::vector<int64_t> dims;
  size_t at = 0;
  while (at < text.size()) {
    size_t x = text.find('x', at);
    dims.push_back(std::stoll(text.substr(at, x == std::string::npos ? std::string::npos : x - at)));
    if (x == std::string::npos) break;
    at = x + 1;
  }
  return dims;
}

bool parse_options(int argc, char** argv, Options* o) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i], value = argv[i + 1];
    if (key == "--url") {
      const size_t colon = value.rfind(':');
      if (colon == std::string::npos) return false;
      o->host = value.substr(0, colon), o->port = value.substr(colon + 1);
    } else if (key == "--model") o->model = value;
    else if (key == "--shape") o->shape = parse_shape(value);
    else if (key == "--transport") o->transport = value;
    else if (key == "--connections") o->connections = std::stoi(value);
    else if (key == "--requests") o->requests = std::stoll(value);
    else if (key == "--rate") o->rate = std::stod(value);
    else if (key == "--seed") o->seed = std::stoull(value);
    else return false;
  }
  return !o->port.empty() && !o->model.empty() && !o->shape.empty() && o->connections > 0 &&
         (o->transport == "shm" || o->transport == "binary");
}

// One keep-alive HTTP connection.
class Connection {
 public:
  Connection(asio::io_context& io, const Options& o) : socket_(io) {
    asio::ip::tcp::resolver resolver(io);
    asio::connect(socket_, resolver.resolve(o.host, o.port));
    socket_.set_option(asio::ip::tcp::no_delay(true));
    host_ = o.host + ":" + o.port;
  }
  // Sends `body` to `target` and returns the answer's status and body.
  std::pair<int, std::string> post(const std::string& target, const std::string& body, size_t header_length = 0) {
    http::request<http::string_body> request{http::verb::post, target, 11};
    request.set(http::field::host, host_);
    request.set(http::field::content_type, header_length ? "application/octet-stream" : "application/json");
    if (header_length) request.set("Inference-Header-Content-Length", std::to_string(header_length));
    request.body() = body;
    request.prepare_payload();
    http::write(socket_, request);
    http::response<http::string_body> response;
    http::read(socket_, buffer_, response);
    return {int(response.result_int()), std::move(response.body())};
  }
  std::string get(const std::string& target) {
    http::request<http::empty_body> request{http::verb::get, target, 11};
    request.set(http::field::host, host_);
    http::write(socket_, request);
    http::response<http::string_body> response;
    http::read(socket_, buffer_, response);
    return std::move(response.body());
  }

 private:
  asio::ip::tcp::socket socket_;
  boost::beast::flat_buffer buffer_;
  std::string host_;
};

// A POSIX shared-memory object of the connection's own, mapped, unlinked on destruction.
struct SharedRegion {
  std::string key;
  void* base = MAP_FAILED;
  size_t bytes = 0;
  SharedRegion(const std::string& name, size_t size) : key("/" + name), bytes(size) {
    const int fd = shm_open(key.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 || ftruncate(fd, off_t(size)) != 0) throw std::runtime_error("shm_open/ftruncate " + key);
    base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED) throw std::runtime_error("mmap " + key);
  }
  ~SharedRegion() {
    if (base != MAP_FAILED) munmap(base, bytes);
    shm_unlink(key.c_str());
  }
};

struct Output {
  std::string name;
  size_t bytes = 0;
};

// The model's outputs and their sizes for one request (metadata dims of -1 taken as 1).
std::vector<Output> model_outputs(Connection& c, const std::string& model) {
  const json meta = json::parse(c.get("/v2/models/" + model));
  const std::map<std::string, size_t> widths = {{"FP32", 4}, {"FP16", 2}, {"BF16", 2}, {"INT64", 8}, {"INT32", 4}, {"BOOL", 1}};
  std::vector<Output> outputs;
  for (const json& o : meta.at("outputs")) {
    size_t bytes = widths.at(o.at("datatype").get<std::string>());
    for (const json& d : o.at("shape")) bytes *= size_t(std::max<int64_t>(1, d.get<int64_t>()));
    outputs.push_back({o.at("name").get<std::string>(), bytes});
  }
  return outputs;
}

struct Result {
  std::vector<double> latencies_ms;
  int64_t errors = 0;
};

// One connection's share of the run: `count` requests, at `schedule` (seconds after
// `start`, open loop) or back to back.
void run_connection(const Options& o, int index, int64_t count, const std::vector<float>& image,
                    const std::vector<double>& schedule, Clock::time_point start, Result* result) {
  asio::io_context io;
  Connection c(io, o);
  const std::vector<Output> outputs = model_outputs(c, o.model);
  json input = {{"name", "x"}, {"shape", o.shape}, {"datatype", "FP32"}};
  json body = {{"inputs", json::array()}, {"outputs", json::array()}};
  const size_t image_bytes = image.size() * sizeof(float);
  std::unique_ptr<SharedRegion> region;
  const std::string region_name = "strider-load-" + std::to_string(getpid()) + "-" + std::to_string(index);
  std::string payload;
  size_t header_length = 0;
  if (o.transport == "shm") {
    size_t total = image_bytes;
    for (const Output& out : outputs) total += out.bytes;
    region = std::make_unique<SharedRegion>(region_name, total);
    std::memcpy(region->base, image.data(), image_bytes);
    const json reg = {{"key", region->key}, {"offset", 0}, {"byte_size", total}};
    if (c.post("/v2/systemsharedmemory/region/" + region_name + "/register", reg.dump()).first != 200)
      throw std::runtime_error("register " + region_name);
    input["parameters"] = {{"shared_memory_region", region_name}, {"shared_memory_byte_size", image_bytes}};
    size_t at = image_bytes;
    for (const Output& out : outputs) {
      body["outputs"].push_back({{"name", out.name}, {"parameters", {{"shared_memory_region", region_name},
                                                                     {"shared_memory_offset", at},
                                                                     {"shared_memory_byte_size", out.bytes}}}});
      at += out.bytes;
    }
    body["inputs"].push_back(input);
    payload = body.dump();
  } else {
    input["parameters"] = {{"binary_data_size", image_bytes}};
    body["inputs"].push_back(input);
    body.erase("outputs");
    body["parameters"] = {{"binary_data_output", true}};
    payload = body.dump();
    header_length = payload.size();
    payload.append(reinterpret_cast<const char*>(image.data()), image_bytes);
  }
  const std::string target = "/v2/models/" + o.model + "/infer";
  result->latencies_ms.reserve(size_t(count));
  std::this_thread::sleep_until(start);  // every connection set up: all begin together
  for (int64_t k = 0; k < count; ++k) {
    Clock::time_point due = Clock::now();
    if (!schedule.empty()) {
      due = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(schedule[size_t(k)]));
      std::this_thread::sleep_until(due);  // late (still busy): sent at once, the wait counted
    }
    int status = 0;
    try {
      status = c.post(target, payload, header_length).first;
    } catch (const std::exception&) {
      status = -1;
    }
    result->latencies_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - due).count());
    if (status != 200) ++result->errors;
    if (status < 0) break;  // the connection is gone
  }
  if (region) c.post("/v2/systemsharedmemory/region/" + region_name + "/unregister", "");
}

double percentile(std::vector<double>& values, double p) {
  if (values.empty()) return 0;
  const size_t at = std::min(values.size() - 1, size_t(p / 100.0 * double(values.size())));
  std::nth_element(values.begin(), values.begin() + long(at), values.end());
  return values[at];
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse_options(argc, argv, &o)) {
    std::fprintf(stderr, "usage: serve_load_client --url HOST:PORT --model NAME --shape 1x3x224x224 [--transport shm|binary] "
                         "[--connections N] [--requests N] [--rate R] [--seed S]\n");
    return 2;
  }
  prctl(PR_SET_TIMERSLACK, 1UL);  // sleeps end when asked, not up to 50 us later
  std::mt19937_64 rng(o.seed);
  int64_t elements = 1;
  for (int64_t d : o.shape) elements *= d;
  std::vector<float> image(static_cast<size_t>(elements));
  std::normal_distribution<float> normal;
  for (float& v : image) v = normal(rng);
  const int64_t per_connection = std::max<int64_t>(1, o.requests / o.connections);
  std::vector<std::vector<double>> schedules(size_t(o.connections));
  if (o.rate > 0) {  // each connection a Poisson stream of rate / connections: Poisson at `rate` in all
    std::exponential_distribution<double> gap(o.rate / o.connections);
    for (auto& s : schedules) {
      double t = 0;
      for (int64_t k = 0; k < per_connection; ++k) s.push_back(t += gap(rng));
    }
  }
  std::vector<Result> results(size_t(o.connections));
  std::vector<std::thread> threads;
  std::atomic<int> failed_to_start{0};
  const Clock::time_point start = Clock::now() + std::chrono::milliseconds(200 + 2 * o.connections);
  for (int i = 0; i < o.connections; ++i)
    threads.emplace_back([&, i] {
      try {
        run_connection(o, i, per_connection, image, schedules[size_t(i)], start, &results[size_t(i)]);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "connection %d: %s\n", i, e.what());
        results[size_t(i)].errors += per_connection - int64_t(results[size_t(i)].latencies_ms.size());
        ++failed_to_start;
      }
    });
  for (std::thread& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<double> all;
  int64_t errors = 0;
  for (Result& r : results) {
    all.insert(all.end(), r.latencies_ms.begin(), r.latencies_ms.end());
    errors += r.errors;
  }
  const int64_t ok = int64_t(all.size()) - std::min<int64_t>(errors, int64_t(all.size()));
  const json out = {{"rate", double(ok) / seconds}, {"p50", percentile(all, 50)}, {"p99", percentile(all, 99)},
                    {"errors", errors}, {"ok", ok}};
  std::printf("%s\n", out.dump().c_str());
  return failed_to_start > 0 ? 1 : 0;
}
