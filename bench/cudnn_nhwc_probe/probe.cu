// cuDNN NHWC channel-slice probe: does cuDNN 9's graph (backend) API accept a 3x3 convolution
// whose X and/or Y are channel slices of larger channels-last tensors, is the result right,
// does it leave the rest of the output buffer alone, and how fast is it next to dense NHWC
// (backend and legacy API) and the legacy API on NCHW channel slices. See README.md.
#include <set>

#include "probe_common.h"

namespace {

// ---------------------------------------------------------------- backend API

struct Desc {
  cudnnBackendDescriptor_t d = nullptr;
  ~Desc() {
    if (d) cudnnBackendDestroyDescriptor(d);
  }
};
using DescPtr = std::shared_ptr<Desc>;

std::string create(cudnnBackendDescriptorType_t type, DescPtr* out, const char* what) {
  *out = std::make_shared<Desc>();
  return dnn_check(cudnnBackendCreateDescriptor(type, &(*out)->d), std::string("cudnnBackendCreateDescriptor(") + what + ")");
}
std::string set(const DescPtr& d, cudnnBackendAttributeName_t attr, cudnnBackendAttributeType_t type, int64_t count,
                const void* value, const char* what) {
  return dnn_check(cudnnBackendSetAttribute(d->d, attr, type, count, value),
                   std::string("cudnnBackendSetAttribute(") + what + ")");
}
std::string finalize(const DescPtr& d, const char* what) {
  return dnn_check(cudnnBackendFinalize(d->d), std::string("cudnnBackendFinalize(") + what + ")");
}

// Largest power of two (<= 16, or --max-align) dividing the address: the honest alignment.
int64_t alignment_of(const void* ptr) {
  uintptr_t a = reinterpret_cast<uintptr_t>(ptr);
  int64_t align = 1;
  while (align < g_opt.max_align && a % uintptr_t(align * 2) == 0) align *= 2;
  return align;
}

std::string be_tensor(int64_t uid, DT dt, const int64_t dims[4], const int64_t strides[4], const void* ptr,
                      const char* name, DescPtr* out) {
  TRY(create(CUDNN_BACKEND_TENSOR_DESCRIPTOR, out, name));
  cudnnDataType_t type = dt_dnn(dt);
  int64_t align = alignment_of(ptr);
  TRY(set(*out, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type, "TENSOR_DATA_TYPE"));
  TRY(set(*out, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims, "TENSOR_DIMENSIONS"));
  TRY(set(*out, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides, "TENSOR_STRIDES"));
  TRY(set(*out, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, "TENSOR_UNIQUE_ID"));
  TRY(set(*out, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, "TENSOR_BYTE_ALIGNMENT"));
  return finalize(*out, name);
}

std::string be_view(int64_t uid, const Problem& p, const Layout& l, const void* ptr, const char* name, DescPtr* out) {
  int64_t dims[4] = {l.n, l.c, l.h, l.w}, strides[4] = {l.sn(), l.sc(), l.sh(), l.sw()};
  return be_tensor(uid, p.dt, dims, strides, ptr, name, out);
}

std::string be_conv_desc(DescPtr* out) {
  TRY(create(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, out, "CONVOLUTION"));
  cudnnDataType_t comp = CUDNN_DATA_FLOAT;
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  int64_t dims = 2, ones[2] = {1, 1};
  TRY(set(*out, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp, "CONVOLUTION_COMP_TYPE"));
  TRY(set(*out, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode, "CONVOLUTION_CONV_MODE"));
  TRY(set(*out, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims, "CONVOLUTION_SPATIAL_DIMS"));
  TRY(set(*out, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, ones, "CONVOLUTION_DILATIONS"));
  TRY(set(*out, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, ones, "CONVOLUTION_FILTER_STRIDES"));
  TRY(set(*out, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, ones, "CONVOLUTION_PRE_PADDINGS"));
  TRY(set(*out, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, ones, "CONVOLUTION_POST_PADDINGS"));
  return finalize(*out, "CONVOLUTION");
}

enum : int64_t { kUidX = 1, kUidW = 2, kUidY = 3 };

// Everything the graph refers to, kept alive as long as any plan built from it.
struct BeGraph {
  DescPtr x, w, y, conv, op, graph;
};

std::string be_graph(const Problem& p, BeGraph* g) {
  drain_last_error();
  TRY(be_view(kUidX, p, p.x, p.x_ptr, "tensor X", &g->x));
  TRY(be_view(kUidY, p, p.y, p.y_ptr, "tensor Y", &g->y));
  int64_t K = p.y.c, C = p.x.c;
  int64_t wdims[4] = {K, C, 3, 3};
  int64_t krsc[4] = {9 * C, 1, 3 * C, C}, kcrs[4] = {9 * C, 9, 3, 1};
  TRY(be_tensor(kUidW, p.dt, wdims, p.var->nhwc ? krsc : kcrs, p.w_ptr, "tensor W", &g->w));
  TRY(be_conv_desc(&g->conv));
  TRY(create(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, &g->op, "CONV_FWD op"));
  float alpha = 1.f, beta = 0.f;
  TRY(set(g->op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g->x->d, "FWD_X"));
  TRY(set(g->op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g->w->d, "FWD_W"));
  TRY(set(g->op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g->y->d, "FWD_Y"));
  TRY(set(g->op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g->conv->d,
          "FWD_CONV_DESC"));
  TRY(set(g->op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha, "FWD_ALPHA"));
  TRY(set(g->op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta, "FWD_BETA"));
  TRY(finalize(g->op, "CONV_FWD op"));
  TRY(create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &g->graph, "OPERATIONGRAPH"));
  TRY(set(g->graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g->op->d, "OPERATIONGRAPH_OPS"));
  TRY(set(g->graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &g_dnn, "OPERATIONGRAPH_HANDLE"));
  return finalize(g->graph, "OPERATIONGRAPH");
}

std::string be_heuristics(const BeGraph& g, cudnnBackendHeurMode_t mode, std::vector<DescPtr>* cfgs) {
  DescPtr heur;
  TRY(create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur, "ENGINEHEUR"));
  TRY(set(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g.graph->d,
          "ENGINEHEUR_OPERATION_GRAPH"));
  TRY(set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode, "ENGINEHEUR_MODE"));
  TRY(finalize(heur, "ENGINEHEUR"));
  int64_t count = 0;
  DNN(cudnnBackendGetAttribute(heur->d, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
      "cudnnBackendGetAttribute(ENGINEHEUR_RESULTS count)");
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    cfgs->emplace_back();
    TRY(create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfgs->back(), "ENGINECFG"));
    raw.push_back(cfgs->back()->d);
  }
  if (count == 0) return "";
  int64_t returned = 0;
  DNN(cudnnBackendGetAttribute(heur->d, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &returned,
                               raw.data()),
      "cudnnBackendGetAttribute(ENGINEHEUR_RESULTS)");
  cfgs->resize(size_t(std::min(returned, count)));
  return "";
}

struct EngineInfo {
  int64_t index = -1;
  bool tensor_core = false, down_convert = false;
  std::string tag = "eng?";  // "eng12(tc,wino)"
};

std::string be_engine_info(const DescPtr& cfg, EngineInfo* info) {
  DescPtr engine;
  TRY(create(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine, "ENGINE"));
  int64_t n = 0;
  DNN(cudnnBackendGetAttribute(cfg->d, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &engine->d),
      "cudnnBackendGetAttribute(ENGINECFG_ENGINE)");
  DNN(cudnnBackendGetAttribute(engine->d, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &info->index),
      "cudnnBackendGetAttribute(ENGINE_GLOBAL_INDEX)");
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  DNN(cudnnBackendGetAttribute(engine->d, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                               CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, notes),
      "cudnnBackendGetAttribute(ENGINE_NUMERICAL_NOTE)");
  std::string tags;
  for (int64_t i = 0; i < n && i < CUDNN_NUMERICAL_NOTE_TYPE_COUNT; ++i) {
    const char* t = nullptr;
    switch (notes[i]) {
      case CUDNN_NUMERICAL_NOTE_TENSOR_CORE: t = "tc", info->tensor_core = true; break;
      case CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS: t = "downcvt", info->down_convert = true; break;
      case CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION: t = "redprec"; break;
      case CUDNN_NUMERICAL_NOTE_FFT: t = "fft"; break;
      case CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC: t = "nondet"; break;
      case CUDNN_NUMERICAL_NOTE_WINOGRAD: t = "wino"; break;
      default: break;
    }
    if (t) tags += (tags.empty() ? "" : ",") + std::string(t);
  }
  cudnnBackendBehaviorNote_t behavior[CUDNN_BEHAVIOR_NOTE_TYPE_COUNT];
  if (cudnnBackendGetAttribute(engine->d, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                               CUDNN_BEHAVIOR_NOTE_TYPE_COUNT, &n, behavior) == CUDNN_STATUS_SUCCESS)
    for (int64_t i = 0; i < n && i < CUDNN_BEHAVIOR_NOTE_TYPE_COUNT; ++i)
      if (behavior[i] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) tags += (tags.empty() ? "" : ",") + std::string("rtc");
  info->tag = "eng" + std::to_string(info->index) + (tags.empty() ? "" : "(" + tags + ")");
  return "";
}

std::string be_plan(const DescPtr& cfg, DescPtr* plan, int64_t* workspace) {
  TRY(create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, plan, "EXECUTION_PLAN"));
  TRY(set(*plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &g_dnn, "EXECUTION_PLAN_HANDLE"));
  TRY(set(*plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg->d,
          "EXECUTION_PLAN_ENGINE_CONFIG"));
  TRY(finalize(*plan, "EXECUTION_PLAN"));
  int64_t n = 0;
  DNN(cudnnBackendGetAttribute((*plan)->d, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, workspace),
      "cudnnBackendGetAttribute(EXECUTION_PLAN_WORKSPACE_SIZE)");
  return "";
}

std::string be_pack(const Problem& p, DescPtr* pack) {
  TRY(create(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, pack, "VARIANT_PACK"));
  int64_t uids[3] = {kUidX, kUidW, kUidY};
  void* ptrs[3] = {p.x_ptr, p.w_ptr, p.y_ptr};
  TRY(set(*pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids, "VARIANT_PACK_UNIQUE_IDS"));
  TRY(set(*pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, ptrs, "VARIANT_PACK_DATA_POINTERS"));
  TRY(set(*pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &g_workspace, "VARIANT_PACK_WORKSPACE"));
  return finalize(*pack, "VARIANT_PACK");
}

// Plans one engine config; a usable one (not seen yet, within the workspace limit, TF32-free
// for f32 unless --tf32) becomes a candidate. Returns why not, or "".
std::string be_config(const Problem& p, const std::shared_ptr<BeGraph>& g, const DescPtr& cfg, std::set<int64_t>& seen,
                      std::vector<Candidate>& cands, bool* finalized, bool* excluded) {
  EngineInfo info;
  DescPtr plan, pack;
  int64_t ws = 0;
  drain_last_error();
  std::string err = be_engine_info(cfg, &info);
  if (err.empty()) err = be_plan(cfg, &plan, &ws);
  if (!err.empty()) return info.tag + " plan: " + err;
  *finalized = true;
  bool tf32 = p.dt == DT::f32 && (info.tensor_core || info.down_convert) && !g_opt.tf32;
  *excluded = tf32 || size_t(ws) > kMaxWorkspace;
  if (*excluded) return info.tag + (tf32 ? " finalized but uses TF32 (rerun with --tf32)" : " needs > 256 MiB workspace");
  if (!seen.insert(info.index).second || cands.size() >= 24) return "";
  if (err = be_pack(p, &pack); !err.empty()) return info.tag + " variant pack: " + err;
  cands.push_back({info.tag, [g, plan, pack] { return cudnnBackendExecute(g_dnn, plan->d, pack->d); },
                   "cudnnBackendExecute"});
  return "";
}

// Plans every config of one heuristic list; notes "A finalized/offered(excluded)" in o.offered.
void be_mode(const Problem& p, const std::shared_ptr<BeGraph>& g, cudnnBackendHeurMode_t mode, const char* mode_name,
             std::set<int64_t>& seen, std::vector<Candidate>& cands, Outcome& o) {
  std::vector<DescPtr> cfgs;
  std::string err = be_heuristics(*g, mode, &cfgs);
  o.offered += o.offered.empty() ? "" : " ";
  if (!err.empty()) {
    note_refusal(o, std::string(mode_name) + " heuristics: " + err);
    o.offered += std::string(mode_name) + " heur-failed";
    return;
  }
  int finalized = 0, excluded = 0;
  for (const DescPtr& cfg : cfgs) {
    bool fin = false, excl = false;
    err = be_config(p, g, cfg, seen, cands, &fin, &excl);
    finalized += fin, excluded += excl;
    if (err.empty()) continue;
    note_refusal(o, err);
    if (g_opt.verbose) std::printf("    %s: %s\n", mode_name, err.c_str());
  }
  o.offered += std::string(mode_name) + " " + std::to_string(finalized) + "/" + std::to_string(cfgs.size());
  if (excluded) o.offered += "(" + std::to_string(excluded) + " excl)";
}

void run_backend(Problem& p, Outcome& o) {
  auto g = std::make_shared<BeGraph>();
  std::string err = be_graph(p, g.get());
  if (!err.empty()) {
    o.refusal = err;
    o.offered = "graph refused";
    return;
  }
  std::set<int64_t> seen;
  std::vector<Candidate> cands;
  be_mode(p, g, CUDNN_HEUR_MODE_A, "A", seen, cands, o);
  be_mode(p, g, CUDNN_HEUR_MODE_FALLBACK, "FB", seen, cands, o);
  evaluate(p, cands, o);
}

// ---------------------------------------------------------------- legacy API

struct Legacy {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  ~Legacy() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
};

std::string legacy_tensor(const Problem& p, const Layout& l, cudnnTensorDescriptor_t* d, const char* name) {
  int dims[4] = {int(l.n), int(l.c), int(l.h), int(l.w)};
  int strides[4] = {int(l.sn()), int(l.sc()), int(l.sh()), int(l.sw())};
  DNN(cudnnCreateTensorDescriptor(d), "cudnnCreateTensorDescriptor");
  DNN(cudnnSetTensorNdDescriptor(*d, dt_dnn(p.dt), 4, dims, strides),
      (std::string("cudnnSetTensorNdDescriptor(") + name + ")").c_str());
  return "";
}

std::string legacy_setup(const Problem& p, Legacy* l) {
  drain_last_error();
  TRY(legacy_tensor(p, p.x, &l->x, "X"));
  TRY(legacy_tensor(p, p.y, &l->y, "Y"));
  DNN(cudnnCreateFilterDescriptor(&l->w), "cudnnCreateFilterDescriptor");
  DNN(cudnnSetFilter4dDescriptor(l->w, dt_dnn(p.dt), p.var->nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, int(p.y.c),
                                 int(p.x.c), 3, 3),
      "cudnnSetFilter4dDescriptor");
  DNN(cudnnCreateConvolutionDescriptor(&l->conv), "cudnnCreateConvolutionDescriptor");
  DNN(cudnnSetConvolution2dDescriptor(l->conv, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
      "cudnnSetConvolution2dDescriptor");
  // As the runtime does: f32 stays true f32 (FMA) unless --tf32; bf16 uses tensor cores.
  cudnnMathType_t math = p.dt == DT::bf16 ? CUDNN_TENSOR_OP_MATH : g_opt.tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
  DNN(cudnnSetConvolutionMathType(l->conv, math), "cudnnSetConvolutionMathType");
  return "";
}

const char* algo_name(int a) {
  static const char* names[] = {"implicit_gemm", "implicit_precomp_gemm", "gemm", "direct",
                                "fft", "fft_tiling", "winograd", "winograd_nonfused"};
  return a >= 0 && a < 8 ? names[a] : "?";
}

// Every forward algorithm whose workspace query succeeds is a candidate; whether the
// views are accepted shows only when it runs (cuDNN refuses some strides at run time).
void run_legacy(Problem& p, Outcome& o) {
  auto l = std::make_shared<Legacy>();
  std::string err = legacy_setup(p, l.get());
  if (!err.empty()) {
    o.refusal = err;
    o.offered = "descriptors refused";
    return;
  }
  std::vector<Candidate> cands;
  int offered = 0;
  for (int a = 0; a < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; ++a) {
    auto algo = cudnnConvolutionFwdAlgo_t(a);
    size_t ws = 0;
    cudnnStatus_t s = cudnnGetConvolutionForwardWorkspaceSize(g_dnn, l->x, l->w, l->conv, l->y, algo, &ws);
    std::string name = "algo" + std::to_string(a) + "(" + algo_name(a) + ")";
    if (s != CUDNN_STATUS_SUCCESS || ws > kMaxWorkspace) {
      if (g_opt.verbose) std::printf("    %-28s workspace query: %s\n", name.c_str(), cudnnGetErrorString(s));
      continue;
    }
    ++offered;
    void *x = p.x_ptr, *w = p.w_ptr, *y = p.y_ptr;
    cands.push_back({name,
                     [l, algo, ws, x, w, y] {
                       float one = 1.f, zero = 0.f;
                       return cudnnConvolutionForward(g_dnn, &one, l->x, x, l->w, w, l->conv, algo, g_workspace, ws,
                                                      &zero, l->y, y);
                     },
                     "cudnnConvolutionForward"});
  }
  evaluate(p, cands, o);
  o.offered = "algos " + std::to_string(o.ran) + "/" + std::to_string(offered) + " ran";
  if (offered == 0) note_refusal(o, "no algorithm's workspace query succeeded");
}

// ---------------------------------------------------------------- driver

struct Row {
  std::string shape, variant;
  int64_t batch;
  DT dt;
  Outcome o;
};

void print_case(const Problem& p, const Outcome& o) {
  std::printf("[%s] %s; ran %d, verified %d, wrong %d", p.label().c_str(), o.offered.c_str(), o.ran, o.verified,
              o.wrong);
  if (!o.best.empty())
    std::printf("; best %s %.2f us GPU (%.2f us host/call), max err %.3g", o.best.c_str(), o.best_time.median_us,
                o.best_time.host_us, o.best_err);
  std::printf("\n");
  if (o.verified == 0 && !o.refusal.empty()) std::printf("    refusal: %s\n", o.refusal.c_str());
  if (!o.wrong_detail.empty()) std::printf("    wrong: %s\n", o.wrong_detail.c_str());
  std::fflush(stdout);
}

std::string accepted_text(const Outcome& o) {
  if (o.verified > 0) return o.wrong ? "yes (" + std::to_string(o.wrong) + " engines wrong)" : "yes";
  if (o.wrong > 0) return "WRONG: " + o.wrong_detail;
  return "no: " + o.refusal;
}

void print_table(const std::vector<Row>& rows) {
  std::printf("\n%-13s %3s %-5s %-23s %-30s %-26s %9s %9s %9s  %s\n", "shape", "N", "dtype", "variant", "engines",
              "best", "max_err", "median_us", "host_us", "accepted");
  for (const Row& r : rows) {
    char err[32] = "-", us[32] = "-", host[32] = "-";
    if (!std::isnan(r.o.best_err)) std::snprintf(err, sizeof err, "%.3g", r.o.best_err);
    if (r.o.best_time.median_us >= 0) std::snprintf(us, sizeof us, "%.2f", r.o.best_time.median_us);
    if (r.o.best_time.host_us >= 0) std::snprintf(host, sizeof host, "%.2f", r.o.best_time.host_us);
    std::printf("%-13s %3lld %-5s %-23s %-30s %-26s %9s %9s %9s  %s\n", r.shape.c_str(), (long long)r.batch,
                dt_name(r.dt), r.variant.c_str(), r.o.offered.c_str(), r.o.best.empty() ? "-" : r.o.best.c_str(), err,
                us, host, one_line(accepted_text(r.o), 400).c_str());
  }
}

bool parse_args(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--tf32") g_opt.tf32 = true;
    else if (a == "--verbose" || a == "-v") g_opt.verbose = true;
    else if (a.rfind("--only=", 0) == 0) g_opt.only = a.substr(7);
    else if (a.rfind("--max-align=", 0) == 0) g_opt.max_align = std::max<int64_t>(1, std::atoll(a.c_str() + 12));
    else if (a.rfind("--runs=", 0) == 0) g_opt.runs = std::max(1, std::atoi(a.c_str() + 7));
    else {
      std::fprintf(stderr,
                   "usage: %s [--tf32] [--verbose] [--only=SUBSTR] [--max-align=BYTES] [--runs=N]\n"
                   "  --only matches the case label, e.g. --only=sliceXY or --only='N=32 bf16'\n",
                   argv[0]);
      return false;
    }
  }
  return true;
}

int init_device() {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    std::fprintf(stderr, "no CUDA device: %s\n",
                 e != cudaSuccess ? cuda_error("cudaGetDeviceCount", e).c_str() : "cudaGetDeviceCount returned 0");
    return 4;
  }
  cudaDeviceProp prop{};
  fatal_if(cuda_check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties"));
  int rt = 0;
  cudaRuntimeGetVersion(&rt);
  std::printf("device 0: %s (sm_%d%d, %d SMs); CUDA runtime %d; cuDNN %zu (headers %d)\n", prop.name, prop.major,
              prop.minor, prop.multiProcessorCount, rt, cudnnGetVersion(), CUDNN_VERSION);
  fatal_if(dnn_check(cudnnCreate(&g_dnn), "cudnnCreate"));
  fatal_if(cuda_check(cudaStreamCreate(&g_stream), "cudaStreamCreate"));
  fatal_if(dnn_check(cudnnSetStream(g_dnn, g_stream), "cudnnSetStream"));
  fatal_if(cuda_check(cudaMalloc(&g_workspace, kMaxWorkspace), "cudaMalloc(workspace)"));
  fatal_if(create_events(std::max(g_opt.runs, 20)));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (!parse_args(argc, argv)) return 2;
  if (int rc = init_device()) return rc;
  std::printf("f32 math: %s; alignment cap %lld bytes; timing: warm-up %d, median of %d\n",
              g_opt.tf32 ? "TF32 allowed" : "true f32 (TF32 engines excluded)", (long long)g_opt.max_align,
              g_opt.warmup, g_opt.runs);
  std::vector<Row> rows;
  for (const ShapeSpec& shape : kShapes)
    for (int64_t batch : {1, 32})
      for (DT dt : {DT::f32, DT::bf16})
        for (const VariantSpec& var : kVariants) {
          if (g_device_broken) break;
          Problem p;
          p.shape = &shape, p.var = &var, p.batch = batch, p.dt = dt;
          if (!g_opt.only.empty() && p.label().find(g_opt.only) == std::string::npos) continue;
          Outcome o;
          setup_host(p);
          std::string err = setup_device(p);
          if (!err.empty()) o.refusal = "setup: " + err;
          else if (var.api == Api::backend) run_backend(p, o);
          else run_legacy(p, o);
          print_case(p, o);
          rows.push_back({shape.name, var.name, batch, dt, o});
        }
  print_table(rows);
  if (g_device_broken) {
    std::printf("\nstopped early: a CUDA error left the device unusable (see the last case)\n");
    return 3;
  }
  return 0;
}
