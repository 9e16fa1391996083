// Shared pieces of the cuDNN NHWC channel-slice probe (probe.cu includes this once): options,
// error text, the cases, host data and the CPU reference, output checks, timing.
#pragma once
#include <cuda_runtime.h>
#include <cudnn.h>
#include <cudnn_backend.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace {

// ---------------------------------------------------------------- options, errors

struct Options {
  bool tf32 = false;     // f32: allow TF32 tensor-core engines/algorithms (the runtime's default is no)
  bool verbose = false;  // one line per engine/algorithm tried
  int64_t max_align = 16;
  int runs = 200, warmup = 20;
  std::string only;  // run only cases whose label contains this
};
Options g_opt;
cudnnHandle_t g_dnn = nullptr;
cudaStream_t g_stream = nullptr;
bool g_device_broken = false;  // a sticky CUDA error: stop probing, print what we have
constexpr size_t kMaxWorkspace = size_t(256) << 20;
void* g_workspace = nullptr;

std::string one_line(std::string s, size_t limit = 300) {
  for (char& c : s)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  if (s.size() > limit) s = s.substr(0, limit) + "...";
  return s;
}

std::string dnn_error(const char* call, cudnnStatus_t s) {
  char last[2048] = {0};
  cudnnGetLastErrorString(last, sizeof last);
  std::string m = std::string(call) + ": " + cudnnGetErrorString(s);
  if (last[0]) m += " [" + one_line(last) + "]";
  return m;
}

std::string cuda_error(const char* call, cudaError_t e) {
  return std::string(call) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
}

std::string dnn_check(cudnnStatus_t s, const std::string& call) {
  return s == CUDNN_STATUS_SUCCESS ? "" : dnn_error(call.c_str(), s);
}
std::string cuda_check(cudaError_t e, const char* call) { return e == cudaSuccess ? "" : cuda_error(call, e); }
// Empties cuDNN's per-thread last-error text so a stale message is not pinned on a later error.
void drain_last_error() {
  char sink[2048];
  cudnnGetLastErrorString(sink, sizeof sink);
}

// Each helper returns "" on success or the failing call's name and error text.
#define DNN(call, name) do { cudnnStatus_t s_ = (call); if (s_ != CUDNN_STATUS_SUCCESS) return dnn_error(name, s_); } while (0)
#define CUDA(call, name) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) return cuda_error(name, e_); } while (0)
#define TRY(expr) do { std::string err_ = (expr); if (!err_.empty()) return err_; } while (0)

void fatal_if(const std::string& err) {
  if (err.empty()) return;
  std::fprintf(stderr, "fatal: %s\n", err.c_str());
  std::exit(1);
}

// ---------------------------------------------------------------- cases

enum class DT { f32, bf16 };
const char* dt_name(DT d) { return d == DT::f32 ? "f32" : "bf16"; }
size_t dt_size(DT d) { return d == DT::f32 ? 4 : 2; }
cudnnDataType_t dt_dnn(DT d) { return d == DT::f32 ? CUDNN_DATA_FLOAT : CUDNN_DATA_BFLOAT16; }

struct ShapeSpec {
  const char* name;
  int64_t ctot, cin0, cin, cout0, cout, h, w;  // X = channels [cin0, cin0+cin), Y = [cout0, cout0+cout)
};
const ShapeSpec kShapes[] = {
    {"c2f16/48@40", 48, 16, 16, 32, 16, 40, 40},
    {"det32/96@40", 96, 32, 32, 64, 32, 40, 40},
    {"det64/192@20", 192, 64, 64, 128, 64, 20, 20},
};

enum class Api { backend, legacy };
struct VariantSpec {
  const char* name;
  Api api;
  bool nhwc, x_slice, y_slice, shared;  // shared: X and Y are slices of one buffer
};
const VariantSpec kVariants[] = {
    {"be.nhwc.dense", Api::backend, true, false, false, false},
    {"be.nhwc.sliceX", Api::backend, true, true, false, false},
    {"be.nhwc.sliceY", Api::backend, true, false, true, false},
    {"be.nhwc.sliceXY", Api::backend, true, true, true, false},
    {"be.nhwc.sliceXY.shared", Api::backend, true, true, true, true},
    {"be.nchw.sliceXY", Api::backend, false, true, true, false},
    {"legacy.nhwc.dense", Api::legacy, true, false, false, false},
    {"legacy.nhwc.sliceXY", Api::legacy, true, true, true, false},
    {"legacy.nchw.sliceXY", Api::legacy, false, true, true, false},
};

// A [N, C, H, W] view of a buffer with ctot channels, starting at channel c0.
struct Layout {
  bool nhwc = true;
  int64_t n = 0, c = 0, h = 0, w = 0, ctot = 0, c0 = 0;
  int64_t sn() const { return ctot * h * w; }
  int64_t sc() const { return nhwc ? 1 : h * w; }
  int64_t sh() const { return nhwc ? w * ctot : w; }
  int64_t sw() const { return nhwc ? ctot : 1; }
  int64_t base() const { return c0 * sc(); }
  int64_t index(int64_t in, int64_t ic, int64_t ih, int64_t iw) const {
    return base() + in * sn() + ic * sc() + ih * sh() + iw * sw();
  }
  int64_t buffer_elems() const { return n * ctot * h * w; }
  int64_t channel_of(int64_t e) const { return nhwc ? e % ctot : (e / (h * w)) % ctot; }
  bool in_view(int64_t e) const {
    int64_t ch = channel_of(e);
    return ch >= c0 && ch < c0 + c;
  }
};

// ---------------------------------------------------------------- host data helpers

uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return uint16_t(u >> 16);
}
float from_bf16(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
float representable(float f, DT d) { return d == DT::bf16 ? from_bf16(to_bf16(f)) : f; }

void encode(float f, DT d, uint8_t* out) {
  uint16_t b = to_bf16(f);
  d == DT::f32 ? (void)std::memcpy(out, &f, 4) : (void)std::memcpy(out, &b, 2);
}
float decode(const uint8_t* p, DT d) {
  float f = 0;
  uint16_t b = 0;
  d == DT::f32 ? (void)std::memcpy(&f, p, 4) : (void)std::memcpy(&b, p, 2);
  return d == DT::f32 ? f : from_bf16(b);
}
std::vector<uint8_t> encode_all(const std::vector<float>& v, DT d) {
  std::vector<uint8_t> out(v.size() * dt_size(d));
  for (size_t i = 0; i < v.size(); ++i) encode(v[i], d, &out[i * dt_size(d)]);
  return out;
}

constexpr uint8_t kSentinel = 0xA5;

struct DevBuf {
  void* p = nullptr;
  ~DevBuf() {
    if (p) cudaFree(p);
  }
};

// ---------------------------------------------------------------- problem

struct Sample {
  int64_t n, k, h, w;
  double ref;
};

struct Problem {
  const ShapeSpec* shape = nullptr;
  const VariantSpec* var = nullptr;
  int64_t batch = 1;
  DT dt = DT::f32;
  Layout x, y;
  std::vector<float> x_host, w_host;  // x_host: the whole X buffer; w_host: logical KCRS
  std::vector<uint8_t> x_bytes, w_bytes;  // as uploaded (w_bytes in the device order)
  std::vector<uint8_t> y_init;        // the whole Y buffer before each checked run
  DevBuf xbuf, wbuf, ybuf;            // ybuf unused when shared
  void *x_ptr = nullptr, *y_ptr = nullptr, *w_ptr = nullptr, *y_base = nullptr;
  std::vector<Sample> samples;
  std::string label() const {
    return std::string(shape->name) + " N=" + std::to_string(batch) + " " + dt_name(dt) + " " + var->name;
  }
};

double reference(const Problem& p, int64_t n, int64_t k, int64_t oh, int64_t ow) {
  double acc = 0;
  for (int64_t c = 0; c < p.x.c; ++c)
    for (int64_t r = 0; r < 3; ++r)
      for (int64_t s = 0; s < 3; ++s) {
        int64_t ih = oh + r - 1, iw = ow + s - 1;
        if (ih < 0 || ih >= p.x.h || iw < 0 || iw >= p.x.w) continue;
        acc += double(p.x_host[size_t(p.x.index(n, c, ih, iw))]) *
               double(p.w_host[size_t(((k * p.x.c + c) * 3 + r) * 3 + s)]);
      }
  return acc;
}

void make_layouts(Problem& p) {
  const ShapeSpec& s = *p.shape;
  const VariantSpec& v = *p.var;
  p.x = {v.nhwc, p.batch, s.cin, s.h, s.w, v.x_slice ? s.ctot : s.cin, v.x_slice ? s.cin0 : 0};
  p.y = {v.nhwc, p.batch, s.cout, s.h, s.w, v.y_slice ? s.ctot : s.cout, v.y_slice ? s.cout0 : 0};
}

// Host side of a case: random X (every channel of the buffer, so reading the wrong channels
// shows), random weights, the initial Y image (sentinel; shared: X's buffer with Y's channels
// set to the sentinel) and the reference values at the sampled output points.
void setup_host(Problem& p) {
  make_layouts(p);
  std::mt19937 rng(1234u + unsigned(p.batch) * 7u + unsigned(p.shape->cin));
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  p.x_host.resize(size_t(p.x.buffer_elems()));
  for (float& f : p.x_host) f = representable(uni(rng), p.dt);
  float scale = 1.7f / std::sqrt(float(p.x.c * 9));
  p.w_host.resize(size_t(p.y.c * p.x.c * 9));
  for (float& f : p.w_host) f = representable(uni(rng) * scale, p.dt);
  // Device weights: KRSC (dense channels-last) for NHWC activations, KCRS for NCHW.
  std::vector<float> w_dev(p.w_host.size());
  for (int64_t k = 0; k < p.y.c; ++k)
    for (int64_t c = 0; c < p.x.c; ++c)
      for (int64_t rs = 0; rs < 9; ++rs)
        w_dev[size_t(p.var->nhwc ? (k * 9 + rs) * p.x.c + c : (k * p.x.c + c) * 9 + rs)] =
            p.w_host[size_t((k * p.x.c + c) * 9 + rs)];
  p.x_bytes = encode_all(p.x_host, p.dt);
  p.w_bytes = encode_all(w_dev, p.dt);
  size_t es = dt_size(p.dt);
  p.y_init.assign(size_t(p.y.buffer_elems()) * es, kSentinel);
  if (p.var->shared) {
    p.y_init = p.x_bytes;
    for (int64_t e = 0; e < p.y.buffer_elems(); ++e)
      if (p.y.in_view(e)) std::memset(&p.y_init[size_t(e) * es], kSentinel, es);
  }
  std::mt19937 pick(99);
  for (int i = 0; i < 400; ++i) {
    Sample s{int64_t(pick() % uint32_t(p.batch)), int64_t(pick() % uint32_t(p.y.c)), int64_t(pick() % uint32_t(p.y.h)),
             int64_t(pick() % uint32_t(p.y.w)), 0.0};
    s.ref = reference(p, s.n, s.k, s.h, s.w);
    p.samples.push_back(s);
  }
}

std::string setup_device(Problem& p) {
  CUDA(cudaMalloc(&p.xbuf.p, p.x_bytes.size()), "cudaMalloc(X)");
  CUDA(cudaMalloc(&p.wbuf.p, p.w_bytes.size()), "cudaMalloc(W)");
  CUDA(cudaMemcpy(p.xbuf.p, p.x_bytes.data(), p.x_bytes.size(), cudaMemcpyHostToDevice), "cudaMemcpy(X)");
  CUDA(cudaMemcpy(p.wbuf.p, p.w_bytes.data(), p.w_bytes.size(), cudaMemcpyHostToDevice), "cudaMemcpy(W)");
  if (!p.var->shared) CUDA(cudaMalloc(&p.ybuf.p, p.y_init.size()), "cudaMalloc(Y)");
  p.y_base = p.var->shared ? p.xbuf.p : p.ybuf.p;
  int64_t es = int64_t(dt_size(p.dt));
  p.x_ptr = static_cast<uint8_t*>(p.xbuf.p) + p.x.base() * es;
  p.y_ptr = static_cast<uint8_t*>(p.y_base) + p.y.base() * es;
  p.w_ptr = p.wbuf.p;
  return "";
}

// ---------------------------------------------------------------- verification

struct Check {
  int64_t outside_changed = 0, unwritten = 0, bad = 0;
  double max_err = 0;
  bool ok() const { return outside_changed == 0 && unwritten == 0 && bad == 0; }
  std::string str() const {
    char b[160];
    std::snprintf(b, sizeof b, "max_err %.3g, bad samples %lld, unwritten %lld, changed outside slice %lld", max_err,
                  (long long)bad, (long long)unwritten, (long long)outside_changed);
    return b;
  }
};

Check verify(const Problem& p, const std::vector<uint8_t>& out) {
  Check c;
  size_t es = dt_size(p.dt);
  uint8_t sentinel[4];
  std::memset(sentinel, kSentinel, 4);
  for (int64_t e = 0; e < p.y.buffer_elems(); ++e) {
    const uint8_t* got = &out[size_t(e) * es];
    if (!p.y.in_view(e)) {
      if (std::memcmp(got, &p.y_init[size_t(e) * es], es) != 0) ++c.outside_changed;
    } else if (std::memcmp(got, sentinel, es) == 0) {
      ++c.unwritten;
    }
  }
  double atol = p.dt == DT::bf16 ? 2e-2 : g_opt.tf32 ? 1e-2 : 5e-4;
  double rtol = p.dt == DT::bf16 ? 2e-2 : g_opt.tf32 ? 1e-2 : 1e-3;
  for (const Sample& s : p.samples) {
    double got = decode(&out[size_t(p.y.index(s.n, s.k, s.h, s.w)) * es], p.dt);
    double err = std::fabs(got - s.ref);
    if (!(err <= atol + rtol * std::fabs(s.ref))) ++c.bad;  // NaN counts as bad
    c.max_err = std::isnan(err) ? INFINITY : std::max(c.max_err, err);
  }
  return c;
}

// ---------------------------------------------------------------- candidates, timing

// One way to run the convolution (one backend engine config, or one legacy algorithm).
struct Candidate {
  std::string name;
  std::function<cudnnStatus_t()> run;
  const char* call;  // name of the executing call, for messages
};

std::vector<cudaEvent_t> g_start, g_stop;  // one pair per timed launch

std::string create_events(int runs) {
  g_start.resize(size_t(runs)), g_stop.resize(size_t(runs));
  for (size_t i = 0; i < g_start.size(); ++i) {
    CUDA(cudaEventCreate(&g_start[i]), "cudaEventCreate");
    CUDA(cudaEventCreate(&g_stop[i]), "cudaEventCreate");
  }
  return "";
}

// Holds the stream for `ns` nanoseconds, so the timed launches queue up behind it and the
// events measure GPU time, not the host's enqueue rate.
__global__ void spin_kernel(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); while (t - t0 < ns);
}

struct Timing {
  float median_us = -1;  // GPU time per run (event pair around each launch, queue pre-filled)
  float host_us = -1;    // host time per enqueue call (cuDNN's CPU overhead)
};

// `warmup` untimed launches, then `runs` timed ones behind a spin kernel; microseconds.
std::string time_candidate(const Candidate& c, int warmup, int runs, Timing* t) {
  for (int i = 0; i < warmup; ++i) DNN(c.run(), c.call);
  CUDA(cudaStreamSynchronize(g_stream), "cudaStreamSynchronize(warm-up)");
  spin_kernel<<<1, 1, 0, g_stream>>>(std::min(20000000ull, 60000ull * unsigned(runs)));
  CUDA(cudaGetLastError(), "spin_kernel launch");
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < runs; ++i) {
    CUDA(cudaEventRecord(g_start[size_t(i)], g_stream), "cudaEventRecord");
    DNN(c.run(), c.call);
    CUDA(cudaEventRecord(g_stop[size_t(i)], g_stream), "cudaEventRecord");
  }
  std::chrono::duration<double, std::micro> host = std::chrono::steady_clock::now() - t0;
  CUDA(cudaStreamSynchronize(g_stream), "cudaStreamSynchronize(timing)");
  std::vector<float> ms(static_cast<size_t>(runs));
  for (int i = 0; i < runs; ++i)
    CUDA(cudaEventElapsedTime(&ms[size_t(i)], g_start[size_t(i)], g_stop[size_t(i)]), "cudaEventElapsedTime");
  std::sort(ms.begin(), ms.end());
  t->median_us = 1000.f * ms[size_t(runs / 2)];
  t->host_us = float(host.count() / runs);
  return "";
}

struct Outcome {
  std::string refusal;  // why nothing was accepted (the first refusal seen)
  std::string offered;  // e.g. "A 3/8 FB 2/4" (finalized / offered)
  int ran = 0, verified = 0, wrong = 0;
  std::string wrong_detail, best;
  double best_err = NAN;
  Timing best_time;
};

void note_refusal(Outcome& o, const std::string& why) {
  if (o.refusal.empty()) o.refusal = why;
}

// Runs one candidate once on a freshly initialised Y and checks it; "" when it ran.
std::string run_checked(Problem& p, const Candidate& c, Check* check) {
  drain_last_error();
  CUDA(cudaMemcpy(p.y_base, p.y_init.data(), p.y_init.size(), cudaMemcpyHostToDevice), "cudaMemcpy(Y init)");
  DNN(c.run(), c.call);
  cudaError_t e = cudaStreamSynchronize(g_stream);
  if (e != cudaSuccess) {
    g_device_broken = true;
    return cuda_error("cudaStreamSynchronize(after run)", e);
  }
  std::vector<uint8_t> out(p.y_init.size());
  CUDA(cudaMemcpy(out.data(), p.y_base, out.size(), cudaMemcpyDeviceToHost), "cudaMemcpy(Y back)");
  *check = verify(p, out);
  return "";
}

void evaluate(Problem& p, const std::vector<Candidate>& cands, Outcome& o) {
  const Candidate* best = nullptr;
  float best_quick = 0;
  for (const Candidate& c : cands) {
    if (g_device_broken) return;
    Check check;
    std::string err = run_checked(p, c, &check);
    if (!err.empty()) {
      note_refusal(o, c.name + ": " + err);
      if (g_opt.verbose) std::printf("    %-28s run failed: %s\n", c.name.c_str(), err.c_str());
      continue;
    }
    ++o.ran;
    if (!check.ok()) {
      ++o.wrong;
      if (o.wrong_detail.empty()) o.wrong_detail = c.name + ": " + check.str();
      if (g_opt.verbose) std::printf("    %-28s WRONG: %s\n", c.name.c_str(), check.str().c_str());
      continue;
    }
    ++o.verified;
    Timing quick_time;
    err = time_candidate(c, 3, 20, &quick_time);
    float quick = quick_time.median_us;
    if (g_opt.verbose) std::printf("    %-28s ok, %s, ~%.1f us %s\n", c.name.c_str(), check.str().c_str(), quick, err.c_str());
    if (!err.empty()) continue;
    if (!best || quick < best_quick) {
      best = &c;
      best_quick = quick;
      o.best_err = check.max_err;
    }
  }
  if (!best) return;
  std::string err = time_candidate(*best, g_opt.warmup, g_opt.runs, &o.best_time);
  if (!err.empty()) o.best_time = Timing{}, note_refusal(o, "timing: " + err);
  o.best = best->name;
}

}  // namespace
