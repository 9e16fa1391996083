#include "hal/cuda/lt_matmul.h"

#include <cublasLt.h>
#include <fmt/format.h>

#include <cstdlib>
#include <optional>

#include "hal/cuda/device_buffer.h"
#include "hal/cuda/copy.h"
#include "hal/cuda/epilogue.h"
#include "hal/cuda/timed_choice.h"
#include "memory/collapse.h"

#include <algorithm>
#include <array>

namespace strider::cuda {
namespace {

constexpr size_t kMaxWorkspace = size_t(32) << 20;

// How many of cuBLASLt's heuristic algorithms are offered to the timed choice. Its first
// pick is not always the fastest: for the 1x1 convolutions of MobileNetV2 and YOLOv8n at
// batch 32 in bf16 another of its first six was (the models 3% and 2% faster on an H100),
// and for the transformers' products at batch 32 (BERT and GPT-2 b32 bf16 1.5% faster,
// BERT f32 0.9%, Llama f32 0.5%, session 30, once the timing's own stream stopped costing
// the graph 5%: timed_choice.cc). Only products of kTimedProductMacs multiply-adds or more
// are timed: at batch 1 (BERT, Llama bf16) it changed nothing.
// STRIDER_CUDA_MATMUL_ALGOS=N (a testing aid) offers N for every product, asked or not (1:
// the heuristic's pick).
constexpr double kTimedProductMacs = double(1 << 26);

int algorithm_candidates(const MatMulViews& v, bool time_algorithms) {
  if (const char* text = std::getenv("STRIDER_CUDA_MATMUL_ALGOS")) return std::clamp(std::atoi(text), 1, 16);
  if (!time_algorithms) return 1;
  const size_t r = size_t(v.out.rank());
  const double macs = double(v.out.num_elements()) * double(v.a.sizes[r - 1]);
  return macs >= kTimedProductMacs ? 6 : 1;
}

// One operand as cuBLASLt sees it: column-major rows x cols with leading dimension ld,
// used transposed or not.
struct LtMatrix {
  bool transposed = false;
  int64_t rows = 0, cols = 0, ld = 0;
};

// Our logical matrix X [r, c] with strides (sr, sc) as a cuBLASLt operand L with
// op(L) = X^T: row-major storage (unit column stride) read as column-major already is X^T
// ([c, r], ld sr, no transpose); column-major storage (unit row stride) is X ([r, c],
// ld sc), transposed by cuBLASLt. nullopt when neither stride is unit, or when the other
// stride is no leading dimension (below the row length: rows that overlap, or a stride 0
// of an Expand's view, which cuBLASLt would read as distinct rows).
std::optional<LtMatrix> as_lt(int64_t r, int64_t c, int64_t sr, int64_t sc) {
  if ((sc == 1 || c == 1) && (r == 1 || sr >= c)) return LtMatrix{false, c, r, r == 1 ? c : sr};
  if ((sr == 1 || r == 1) && (c == 1 || sc >= r)) return LtMatrix{true, r, c, c == 1 ? r : sc};
  return std::nullopt;
}

cudaDataType_t lt_type(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return CUDA_R_16BF;
    case DType::kF16: return CUDA_R_16F;
    default: return CUDA_R_32F;
  }
}

int64_t pointer_alignment(const void* p) {
  auto address = reinterpret_cast<uintptr_t>(p);
  int64_t alignment = 256;
  while (alignment > 1 && address % uintptr_t(alignment) != 0) alignment /= 2;
  return alignment;
}

Status lt(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return Status::ok();
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) return unsupported(fmt::format("cuBLASLt: {}: not supported", what));
  return device_error(fmt::format("cuBLASLt: {} failed with status {}", what, int(status)));
}

struct Batch {
  int64_t count = 1, a = 0, b = 0, out = 0;  // element strides between batches
};

// The batch dims as cuBLASLt runs them: the innermost ones that collapse into one strided
// batch (non-negative strides), and, for the dims before those, one launch per index with
// these element offsets of a, b and out. torch's attention exports broadcast [B, 1, S, D]
// against [B, H, D, S]: no single batch stride covers both, a launch per B does.
struct BatchPlan {
  Batch inner;
  std::vector<std::array<int64_t, 3>> launches;  // at least one: {0, 0, 0} alone when all collapse
};

inline constexpr int64_t kMaxLaunches = 4096;

std::optional<Batch> collapse_batch(const Shape& sizes, const std::vector<Strides>& strides) {
  CollapsedDims c = collapse_dims(sizes, strides);
  if (c.sizes.size() > 1) return std::nullopt;
  for (const Strides& s : c.strides)  // a reversed batch: not a cuBLASLt batch stride
    if (!s.empty() && s[0] < 0) return std::nullopt;
  if (c.sizes.empty()) return Batch{};
  return Batch{c.sizes[0], c.strides[0][0], c.strides[1][0], c.strides[2][0]};
}

std::optional<BatchPlan> plan_batches(const MatMulViews& v) {
  const size_t dims = size_t(v.out.rank()) - 2;
  const Shape sizes(v.out.sizes.begin(), v.out.sizes.begin() + long(dims));
  std::vector<Strides> strides;
  for (const TensorView* t : {&v.a, &v.b, &v.out}) {
    Strides s(t->strides.begin(), t->strides.begin() + long(dims));
    for (size_t d = 0; d < dims; ++d)
      if (t->sizes[d] == 1) s[d] = 0;  // a broadcast batch dim
    strides.push_back(std::move(s));
  }
  for (size_t split = 0; split <= dims; ++split) {
    auto tail = [&](const Strides& s) { return Strides(s.begin() + long(split), s.end()); };
    std::optional<Batch> inner = collapse_batch(Shape(sizes.begin() + long(split), sizes.end()),
                                                {tail(strides[0]), tail(strides[1]), tail(strides[2])});
    if (!inner) continue;
    const Shape outer(sizes.begin(), sizes.begin() + long(split));
    if (num_elements(outer) > kMaxLaunches) return std::nullopt;
    BatchPlan plan{*inner, {}};
    Shape index(split, 0);
    for (int64_t n = 0; n < num_elements(outer); ++n) {
      std::array<int64_t, 3> at{};
      for (size_t d = 0; d < split; ++d)
        for (size_t k = 0; k < 3; ++k) at[k] += index[d] * strides[k][d];
      plan.launches.push_back(at);
      for (size_t d = split; d-- > 0;) {
        if (++index[d] < outer[d]) break;
        index[d] = 0;
      }
    }
    return plan;
  }
  return std::nullopt;
}

class LtMatMul final : public Kernel {
 public:
  ~LtMatMul() override {
    for (cublasLtMatrixLayout_t layout : {a_, b_, d_})
      if (layout) cublasLtMatrixLayoutDestroy(layout);
    if (op_) cublasLtMatmulDescDestroy(op_);
  }
  // With `c` (of out's dtype and layout, as has_layout_of says): out = scale * a x b +
  // beta * c, cuBLASLt reading c where it is (a residual: no pass of its own).
  // `rank`: which of cuBLASLt's heuristic algorithms (0: its first pick); UNSUPPORTED
  // where it offers fewer.
  Status init(const MatMulViews& v, const TensorView* bias, float scale, const CudaContext& context,
              const TensorView* c = nullptr, float beta = 0.0f, int rank = 0);
  // out = scale * a x b + beta * C for any other C: C (broadcast to out's sizes) is copied
  // into out first and cuBLASLt reads it back as its C, which is D itself (Gemm's general C).
  void accumulate(TensorView out, TensorView c, float beta) {
    addend_ = std::make_pair(std::move(out), std::move(c));
    beta_ = beta;
  }
  Status run(const QueueContext& queue) override {
    if (addend_) STRIDER_RETURN_IF_ERROR(launch_copy(addend_->first, addend_->second, stream_of(queue)));
    const float beta = beta_;
    for (const auto& [a, b, d] : launches_) {  // byte offsets of one outer batch index
      const std::byte *a_ptr = a_ptr_ + a, *b_ptr = b_ptr_ + b;
      std::byte* d_ptr = d_ptr_ + d;
      const std::byte* c_ptr = c_ptr_ ? c_ptr_ + d : d_ptr;  // c has d's layout: the same offsets
      STRIDER_RETURN_IF_ERROR(lt(cublasLtMatmul(handle_, op_, &scale_, b_ptr, a_, a_ptr, b_, &beta, c_ptr, d_, d_ptr, d_,
                                                &algo_, workspace_.as<void>(), workspace_.size(), stream_of(queue)),
                                 "cublasLtMatmul"));
    }
    return Status::ok();
  }
  std::string implementation() const override {
    return std::string("cublasLt") + (rank_ > 0 ? fmt::format("#{}", rank_) : "") + (has_bias_ ? "+bias" : "") + (c_ptr_ ? "+addend" : addend_ ? "+copied-addend" : "");
  }

 private:
  Status layout(cublasLtMatrixLayout_t* layout, DType dtype, const LtMatrix& m, const Batch& batch, int64_t stride);
  Status choose_algorithm(const MatMulViews& v, int rank);

  int rank_ = 0;
  cublasLtHandle_t handle_ = nullptr;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, d_ = nullptr;  // cuBLASLt's A (our b), B (our a), D
  cublasLtMatmulAlgo_t algo_{};
  const std::byte *a_ptr_ = nullptr, *b_ptr_ = nullptr;  // our a and b
  std::byte* d_ptr_ = nullptr;
  const std::byte* c_ptr_ = nullptr;  // C when it is not D (init's c)
  std::vector<std::array<int64_t, 3>> launches_;  // byte offsets of a, b, d per launch
  std::optional<std::pair<TensorView, TensorView>> addend_;  // (out, C broadcast), when beta * C is added
  float beta_ = 0.0f;
  float scale_ = 1.0f;
  bool has_bias_ = false;
  DeviceBuffer workspace_;
};

Status LtMatMul::layout(cublasLtMatrixLayout_t* layout, DType dtype, const LtMatrix& m, const Batch& batch,
                        int64_t stride) {
  STRIDER_RETURN_IF_ERROR(lt(cublasLtMatrixLayoutCreate(layout, lt_type(dtype), uint64_t(m.rows), uint64_t(m.cols), m.ld),
                             "matrix layout"));
  int32_t count = int32_t(batch.count);
  STRIDER_RETURN_IF_ERROR(
      lt(cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)), "batch"));
  return lt(cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)),
            "batch stride");
}

Status LtMatMul::choose_algorithm(const MatMulViews& v, int rank) {
  cublasLtMatmulPreference_t preference = nullptr;
  STRIDER_RETURN_IF_ERROR(lt(cublasLtMatmulPreferenceCreate(&preference), "preference"));
  uint64_t workspace = kMaxWorkspace;
  cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace));
  // Slices start at whatever offset they start: tell cuBLASLt the real alignments.
  uint32_t align_a = 256, align_b = 256, align_c = 256, align_d = 256;  // the least over every launch's pointers
  for (const auto& [a, b, d] : launches_) {
    align_a = std::min(align_a, uint32_t(pointer_alignment(b_ptr_ + b)));
    align_b = std::min(align_b, uint32_t(pointer_alignment(a_ptr_ + a)));
    align_c = std::min(align_c, uint32_t(pointer_alignment((c_ptr_ ? c_ptr_ : d_ptr_) + d)));
    align_d = std::min(align_d, uint32_t(pointer_alignment(d_ptr_ + d)));
  }
  cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof(align_a));
  cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof(align_b));
  cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof(align_c));
  cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d, sizeof(align_d));
  std::vector<cublasLtMatmulHeuristicResult_t> results(size_t(rank) + 1);
  int found = 0;
  Status s = lt(cublasLtMatmulAlgoGetHeuristic(handle_, op_, a_, b_, d_, d_, preference, rank + 1, results.data(), &found),
                "heuristic");
  cublasLtMatmulPreferenceDestroy(preference);
  STRIDER_RETURN_IF_ERROR(s);
  if (found <= rank)
    return unsupported(fmt::format("cuBLASLt has {} algorithms for {} x {} -> {}", found, v.a.to_string(),
                                   v.b.to_string(), v.out.to_string()));
  rank_ = rank;
  algo_ = results[size_t(rank)].algo;
  return workspace_.allocate(results[size_t(rank)].workspaceSize);
}

Status LtMatMul::init(const MatMulViews& v, const TensorView* bias, float scale, const CudaContext& context,
                      const TensorView* c, float beta, int rank) {
  size_t r = size_t(v.out.rank());
  int64_t m = v.out.sizes[r - 2], n = v.out.sizes[r - 1], k = v.a.sizes[r - 1];
  std::optional<BatchPlan> plan = plan_batches(v);
  std::optional<Batch> batch = plan ? std::optional<Batch>(plan->inner) : std::nullopt;
  // D = C^T [N, M] col-major needs the output row-major; A^T and B^T from either storage.
  std::optional<LtMatrix> lt_a = as_lt(k, n, v.b.strides[r - 2], v.b.strides[r - 1]);
  std::optional<LtMatrix> lt_b = as_lt(m, k, v.a.strides[r - 2], v.a.strides[r - 1]);
  bool row_major_out = (v.out.strides[r - 1] == 1 || n == 1) && (m == 1 || v.out.strides[r - 2] >= n);
  if (!batch || !lt_a || !lt_b || !row_major_out)
    return unsupported(fmt::format("cuBLASLt cannot take views {} x {} -> {}", v.a.to_string(), v.b.to_string(),
                                   v.out.to_string()));
  handle_ = static_cast<cublasLtHandle_t>(context.cublaslt);
  scale_ = scale;
  a_ptr_ = reinterpret_cast<const std::byte*>(v.a.allocation->address() + v.a.byte_offset);
  b_ptr_ = reinterpret_cast<const std::byte*>(v.b.allocation->address() + v.b.byte_offset);
  d_ptr_ = reinterpret_cast<std::byte*>(v.out.allocation->address() + v.out.byte_offset);
  if (c) {
    c_ptr_ = reinterpret_cast<const std::byte*>(c->allocation->address() + c->byte_offset);
    beta_ = beta;
  }
  for (const auto& [a, b, d] : plan->launches)
    launches_.push_back({a * dtype_size(v.a.dtype), b * dtype_size(v.b.dtype), d * dtype_size(v.out.dtype)});
  bool f32 = v.out.dtype == DType::kF32;
  cublasComputeType_t compute = f32 && context.allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  STRIDER_RETURN_IF_ERROR(lt(cublasLtMatmulDescCreate(&op_, compute, CUDA_R_32F), "matmul descriptor"));
  cublasOperation_t trans_a = lt_a->transposed ? CUBLAS_OP_T : CUBLAS_OP_N, trans_b = lt_b->transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a));
  cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b));
  if (bias) {
    if (bias->sizes[size_t(bias->rank()) - 1] > 1 && bias->strides[size_t(bias->rank()) - 1] != 1)
      return unsupported("cuBLASLt bias must be a dense row");
    has_bias_ = true;
    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    const void* bias_ptr = bias->allocation->address() + bias->byte_offset;
    cudaDataType_t bias_type = lt_type(bias->dtype);
    cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue));
    cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr, sizeof(bias_ptr));
    cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type));
  }
  LtMatrix lt_d{false, n, m, m == 1 ? n : v.out.strides[r - 2]};
  STRIDER_RETURN_IF_ERROR(layout(&a_, v.b.dtype, *lt_a, *batch, batch->b));
  STRIDER_RETURN_IF_ERROR(layout(&b_, v.a.dtype, *lt_b, *batch, batch->a));
  STRIDER_RETURN_IF_ERROR(layout(&d_, v.out.dtype, lt_d, *batch, batch->out));
  return choose_algorithm(v, rank);
}

// What the choice among algorithms depends on: the views (sizes, strides, dtypes), where
// they start (cuBLASLt's algorithms differ by the operands' alignment), the epilogue.
std::string algorithm_key(const MatMulViews& v, const TensorView* bias, float scale, const TensorView* addend,
                          bool direct, float beta, int ordinal) {
  auto operand = [](const TensorView& t) {
    return fmt::format("{}:{}@{}", t.to_string(), dtype_name(t.dtype), pointer_alignment(t.allocation->address() + t.byte_offset));
  };
  return fmt::format("MatMul dev{} {} x {} -> {} bias {} scale {} addend {} {} beta {}", ordinal, operand(v.a),
                     operand(v.b), operand(v.out), bias ? operand(*bias) : "-", scale, addend ? operand(*addend) : "-",
                     direct ? "direct" : "copied", beta);
}

}  // namespace

Result<std::unique_ptr<Kernel>> make_lt_matmul(const MatMulViews& views, const TensorView* row_bias, float scale,
                                               const CudaContext& context, const std::string& node,
                                               const TensorView* addend, float beta, bool time_algorithms) {
  DType dtype = views.out.dtype;
  if (dtype != DType::kF32 && dtype != DType::kBF16 && dtype != DType::kF16)
    return unsupported(fmt::format("node '{}': MatMul on {} on CUDA", node, dtype_name(dtype)));
  if (views.a.num_elements() == 0 || views.b.num_elements() == 0 || views.out.num_elements() == 0)
    return unsupported(fmt::format("node '{}': a MatMul with an empty operand on CUDA", node));
  // An addend of out's dtype and layout (a residual) is cuBLASLt's C where it lies.
  const bool direct = addend && addend->dtype == dtype && has_layout_of(*addend, views.out);
  std::optional<TensorView> copied_addend;
  if (addend && !direct) {
    auto c = broadcast_view(*addend, views.out.sizes);
    if (!c.is_ok()) return c.status().with_context(fmt::format("node '{}'", node));
    copied_addend = *c;
  }
  std::vector<std::unique_ptr<Kernel>> candidates;
  for (int rank = 0; rank < algorithm_candidates(views, time_algorithms); ++rank) {
    auto kernel = std::make_unique<LtMatMul>();
    Status s = kernel->init(views, row_bias, scale, context, direct ? addend : nullptr, beta, rank);
    if (!s.is_ok()) {
      if (rank == 0) return s.with_context(fmt::format("node '{}'", node));
      break;  // cuBLASLt offers no more
    }
    if (copied_addend) kernel->accumulate(views.out, *copied_addend, beta);
    candidates.push_back(std::move(kernel));
  }
  return fastest_kernel(algorithm_key(views, row_bias, scale, addend, direct, beta, context.ordinal), std::move(candidates));
}

}  // namespace strider::cuda
