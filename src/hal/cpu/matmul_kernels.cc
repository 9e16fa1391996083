// MatMul and Gemm. Operands are views as they are: a transposed operand (Gemm's transA/B)
// is a permuted view and a column chunk is a leading dimension, never a packed copy.
// oneDNN runs f32 and bf16 (f32 accumulation) when it accepts the strides; everything
// else runs a naive strided loop that accumulates in f32 (f64 for f64, i64 for ints).
#include <atomic>
#include <cstdlib>
#include <string_view>
#include <mutex>
#include <numeric>

#include "hal/cpu/cpu_kernels.h"
#include "hal/cpu/strided_loop.h"
#include "hal/cpu/map_kernel.h"
#include "base/checked_math.h"
#include <optional>

#include "hal/cpu/matmul.h"
#include "hal/cpu/onednn.h"
#include "hal/cpu/row_matmul.h"
#include "hal/cpu/staged_output.h"
#include "hal/cpu/worker_queue.h"

namespace strider::cpu {
namespace {

using KernelPtr = std::unique_ptr<Kernel>;

bool onednn_strides_ok(const TensorView& v) {
  for (size_t d = 0; d < v.sizes.size(); ++d)
    if (v.sizes[d] > 1 && v.strides[d] <= 0) return false;
  return true;
}

class OneDnnMatMul final : public OneDnnPrimitiveKernel {
 public:
  OneDnnMatMul() : OneDnnPrimitiveKernel("MatMul") {}
  // A bias that is a row ([..., 1, N]) is oneDNN's bias argument; any other broadcast
  // (a column [1, M, 1] for channels-first 1x1 convolutions) is a binary-add post-op,
  // since oneDNN's matmul has only its reference implementation for column biases.
  // With `constant_b` (weights, written before any kernel is created and never again)
  // oneDNN may ask for B in a layout of its own; B is then reordered into it once, here.
  // `shared_b`: constant B reordered by an earlier piece of the same product is reused
  // when this one asks for the same layout (and set to this one's otherwise).
  Status init(const MatMulViews& v, const TensorView* bias, float scale, std::span<const OneDnnPostOp> post,
              const std::string& node, bool constant_b = false, dnnl::memory* shared_b = nullptr) {
    // A bias at a lower rank than the product (a vector's Linear: out [N], which the
    // product views as [1, N]) gets leading unit dims, as oneDNN wants one rank for both.
    std::optional<TensorView> lifted;
    if (bias && bias->rank() < v.out.rank()) {
      lifted = *bias;
      lifted->sizes.insert(lifted->sizes.begin(), size_t(v.out.rank() - bias->rank()), 1);
      lifted->strides.insert(lifted->strides.begin(), size_t(v.out.rank() - bias->rank()), 0);
      bias = &*lifted;
    }
    return onednn_call(node, [&] {
      ScopedOmpThreads team(onednn_team_for(v.out.num_elements() * v.a.sizes.back()));
      auto a_md = onednn_desc(v.a), b_plain = onednn_desc(v.b), out_md = onednn_desc(v.out);
      auto b_md = constant_b ? dnnl::memory::desc(b_plain.dims(), b_plain.data_type(), dnnl::memory::format_tag::any)
                             : b_plain;
      dnnl::primitive_attr attr = onednn_attr();
      if (scale != 1.0f) attr.set_output_scales(0, {scale});
      bool row_bias = bias && (bias->rank() < 2 || bias->sizes[size_t(bias->rank()) - 2] == 1);
      dnnl::memory::desc bias_md = bias ? onednn_desc(*bias) : dnnl::memory::desc();
      dnnl::post_ops ops;
      std::vector<std::pair<int, const TensorView*>> binary_args;  // post-op index, operand
      if (bias && !row_bias) {
        binary_args.push_back({ops.len(), bias});
        ops.append_binary(dnnl::algorithm::binary_add, bias_md);
      }
      append_post_ops(post, ops, binary_args, impl_suffix_);
      if (ops.len() > 0) attr.set_post_ops(ops);
      auto desc = row_bias ? dnnl::matmul::desc(a_md, b_md, bias_md, out_md) : dnnl::matmul::desc(a_md, b_md, out_md);
      dnnl::matmul::primitive_desc pd(desc, attr, onednn_engine());
      if (has_binary(post) && !onednn_fast_binary_post_ops(onednn_impl_name(pd)))
        throw dnnl::error(dnnl_unimplemented, "binary post-ops outside the generated code");
      impl_ = onednn_impl_name(pd) + impl_suffix_;
      primitive_ = dnnl::matmul(pd);
      team_ = onednn_creates_team();
      const dnnl::memory b_mem = weights_for(pd, onednn_memory(v.b, b_plain), shared_b);
      args_ = {{DNNL_ARG_SRC, onednn_memory(v.a, a_md)},
               {DNNL_ARG_WEIGHTS, b_mem},
               {DNNL_ARG_DST, onednn_memory(v.out, out_md)},
               {DNNL_ARG_SCRATCHPAD, dnnl::memory(pd.scratchpad_desc(), onednn_engine())}};
      if (row_bias) args_[DNNL_ARG_BIAS] = onednn_memory(*bias, bias_md);
      for (const auto& [index, operand] : binary_args)
        args_[DNNL_ARG_ATTR_MULTIPLE_POST_OP(index) | DNNL_ARG_SRC_1] = onednn_memory(*operand, onednn_desc(*operand));
    });
  }

 private:
  std::string impl_suffix_;
};

// out[batch, m, n] = scale * sum_k a[batch, m, k] * b[batch, k, n], any strides.
template <typename T>
class NaiveMatMul final : public Kernel {
  using Acc = std::conditional_t<std::is_same_v<T, double>, double,
                                 std::conditional_t<std::is_integral_v<T>, int64_t, float>>;

 public:
  NaiveMatMul(MatMulViews v, float scale) : v_(std::move(v)), scale_(scale) {}
  Status run(const QueueContext& context) override {
    size_t r = size_t(v_.out.rank());
    int64_t m_size = v_.out.sizes[r - 2], n_size = v_.out.sizes[r - 1], k_size = v_.a.sizes[r - 1];
    Shape batch(v_.out.sizes.begin(), v_.out.sizes.end() - 2);
    Shape index(batch.size(), 0);
    for (int64_t b = 0; b < num_elements(batch); ++b) {
      const T* a = v_.a.host_data_as<T>() + batch_offset(v_.a, index);
      const T* w = v_.b.host_data_as<T>() + batch_offset(v_.b, index);
      T* o = v_.out.host_data_as<T>() + batch_offset(v_.out, index);
      for (int64_t m = 0; m < m_size; ++m)
        for (int64_t n = 0; n < n_size; ++n) {
          Acc sum = 0;
          for (int64_t k = 0; k < k_size; ++k)
            sum = wrapping_add(sum, wrapping_mul(Acc(load(a[m * v_.a.strides[r - 2] + k * v_.a.strides[r - 1]])),
                                                 Acc(load(w[k * v_.b.strides[r - 2] + n * v_.b.strides[r - 1]]))));
          o[m * v_.out.strides[r - 2] + n * v_.out.strides[r - 1]] =
              store<T>(ComputeType<T>(scale_ == 1.0f ? sum : Acc(double(sum) * scale_)));
        }
      advance_index(index, batch);
    }
    return Status::ok();
  }
  std::string implementation() const override { return "strider:naive-matmul"; }

 private:
  // Offset of a batch position; a broadcast operand (size 1) stays at 0.
  static int64_t batch_offset(const TensorView& v, const Shape& index) {
    int64_t offset = 0;
    for (size_t d = 0; d < index.size(); ++d)
      if (v.sizes[d] != 1) offset += index[d] * v.strides[d];
    return offset;
  }
  MatMulViews v_;
  float scale_;
};

bool is_brgemm(const Kernel& kernel) { return kernel.implementation().find("brg") != std::string::npos; }

// A oneDNN product cut into pieces, each a primitive created for one thread, run side by
// side on strider's own team (hal/cpu/own_team.h; under it no primitive starts threads of
// its own): pieces of the leading batch dim when it has one a thread, else of the rows of
// the product (M), else of its columns (N, a matrix-vector product). Every piece is a view
// of the node's views; constant B reordered once is shared by pieces of rows or batch.
class BandedMatMul final : public Kernel {
 public:
  Status init(const MatMulViews& v, const TensorView* bias, float scale, std::span<const OneDnnPostOp> post,
              const std::string& node, bool constant_b, int pieces, int axis) {
    const int64_t extent = v.out.sizes[size_t(axis)];
    const int r = int(v.out.rank());
    work_per_piece_ = v.out.num_elements() * v.a.sizes.back() / pieces;
    // A bias at a lower rank than the product gets its leading unit dims first, as the
    // whole product's kernel would, so that it is cut along the same axis.
    std::optional<TensorView> lifted;
    if (bias && bias->rank() < r) {
      lifted = *bias;
      lifted->sizes.insert(lifted->sizes.begin(), size_t(r - bias->rank()), 1);
      lifted->strides.insert(lifted->strides.begin(), size_t(r - bias->rank()), 0);
      bias = &*lifted;
    }
    dnnl::memory shared_b;
    for (int k = 0; k < pieces; ++k) {
      const int64_t i0 = extent * k / pieces, i1 = extent * (k + 1) / pieces;
      MatMulViews piece = v;
      if (axis != r - 1) {
        STRIDER_ASSIGN_OR_RETURN(piece.a, part_of(v.a, axis, i0, i1, extent));
      }
      if (axis != r - 2) {
        STRIDER_ASSIGN_OR_RETURN(piece.b, part_of(v.b, axis, i0, i1, extent));
      }
      STRIDER_ASSIGN_OR_RETURN(piece.out, part_of(v.out, axis, i0, i1, extent));
      std::optional<TensorView> piece_bias;
      if (bias) {
        STRIDER_ASSIGN_OR_RETURN(piece_bias, part_of(*bias, axis, i0, i1, extent));
      }
      std::vector<OneDnnPostOp> piece_post(post.begin(), post.end());
      STRIDER_RETURN_IF_ERROR(cut_binary_operands(piece_post, axis, i0, i1, extent));
      // A piece of columns of a dense product, or any piece of a strided one (a channel
      // slice of a concat), is a strided view, which keeps oneDNN off brgemm: it runs into
      // dense scratch of its own and copies its part out, on its thread while that part
      // is in its cache.
      std::optional<StagedOutput> staged;
      if (!is_packed(piece.out)) {
        STRIDER_ASSIGN_OR_RETURN(staged, stage_output(piece.out));
        std::swap(piece.out, staged->dense);
      }
      auto part = std::make_unique<OneDnnMatMul>();
      STRIDER_RETURN_IF_ERROR(part->init(piece, piece_bias ? &*piece_bias : nullptr, scale, piece_post, node, constant_b,
                                         axis == r - 1 ? nullptr : &shared_b));
      implementation_ = part->implementation() + (staged ? " into dense, then copied" : "");
      if (staged) {
        std::swap(piece.out, staged->dense);
        pieces_.push_back(make_staged_kernel(std::move(part), std::move(*staged), piece.out));
      } else {
        pieces_.push_back(std::move(part));
      }
    }
    axis_name_ = axis == r - 1 ? "columns" : axis == r - 2 ? "rows" : "batch";
    return Status::ok();
  }
  Status run(const QueueContext& context) override { return run_side_by_side(pieces_, work_per_piece_, context); }
  std::string implementation() const override {
    return fmt::format("{} pieces of {}: {}", pieces_.size(), axis_name_, implementation_);
  }

 private:
  std::vector<std::unique_ptr<Kernel>> pieces_;
  std::string implementation_;
  int64_t work_per_piece_ = 0;
  const char* axis_name_ = "";
};

// The axes a product may be cut along for a team of `threads` under strider's own team, and
// into how many pieces, best first (BandedMatMul); none below serial_multiply_adds(). The
// leading batch dim when B is not shared by the batch; rows (8 a piece) and columns (16 a
// piece) in the order that makes the team read less: pieces of rows each read all of B,
// pieces of columns all of A. GPT-2's MLP up-projection (B 768x3072, A 128x768) took 0.30
// ms in pieces of rows against 0.26 for oneDNN's own split on two threads.
std::vector<std::pair<int, int>> pieces_axes(const MatMulViews& v, int threads) {
  const int r = int(v.out.rank());
  if (!own_team_enabled() || threads < 2 || r < 2 || v.out.num_elements() * v.a.sizes.back() < serial_multiply_adds())
    return {};
  // As many pieces as threads where the axis allows, fewer where it does not; the axis
  // giving the most first, then the one that reads less.
  auto pieces = [&](int64_t units) { return int(std::min<int64_t>(threads, units)); };
  const bool batched_b = r > 2 && v.b.sizes[0] == v.out.sizes[0];
  const int batch = r > 2 ? pieces(v.out.sizes[0]) : 0, rows = pieces(v.out.sizes[size_t(r - 2)] / 8),
            columns = pieces(v.out.sizes[size_t(r - 1)] / 16);
  const bool b_larger = v.b.num_elements() > v.a.num_elements();
  std::vector<std::pair<int, int>> axes;  // axis, pieces
  if (batched_b) axes.push_back({0, batch});
  if (b_larger) axes.push_back({r - 1, columns});
  axes.push_back({r - 2, rows});
  if (!b_larger) axes.push_back({r - 1, columns});
  if (!batched_b && r > 2) axes.push_back({0, batch});
  std::erase_if(axes, [](const auto& a) { return a.second < 2; });
  std::stable_sort(axes.begin(), axes.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return axes;
}

// The product in pieces on strider's own team when it is big enough (pieces_axes) and
// every piece gets a fast kernel; nullopt otherwise.
std::optional<KernelPtr> banded_matmul(const MatMulViews& v, const TensorView* bias, float scale,
                                       std::span<const OneDnnPostOp> post, const std::string& node, bool constant_b) {
  const int threads = max_parallel_threads();
  for (const auto& [axis, pieces] : pieces_axes(v, threads)) {
    auto banded = std::make_unique<BandedMatMul>();
    if (banded->init(v, bias, scale, post, node, constant_b, pieces, axis).is_ok() && is_brgemm(*banded))
      return KernelPtr(std::move(banded));
  }
  return std::nullopt;
}

// The matmul into a dense copy of v.out's shape, then copied into v.out, if oneDNN runs
// that one on brgemm.
std::optional<KernelPtr> staged_brgemm(const MatMulViews& v, const TensorView* bias, float scale,
                                       std::span<const OneDnnPostOp> post_ops, const std::string& node,
                                       bool constant_b) {
  Result<StagedOutput> staged = stage_output(v.out);
  if (!staged.is_ok()) return std::nullopt;
  if (std::optional<KernelPtr> banded = banded_matmul({v.a, v.b, staged->dense}, bias, scale, post_ops, node, constant_b);
      banded)
    return make_staged_kernel(std::move(*banded), std::move(staged).value(), v.out);
  auto dense = std::make_unique<OneDnnMatMul>();
  if (!dense->init({v.a, v.b, staged->dense}, bias, scale, post_ops, node, constant_b).is_ok() || !is_brgemm(*dense))
    return std::nullopt;
  return make_staged_kernel(std::move(dense), std::move(staged).value(), v.out);
}

}  // namespace

Result<KernelPtr> make_matmul_of(const MatMulViews& v, const TensorView* bias, float scale,
                                 const std::string& node, std::span<const OneDnnPostOp> post_ops, bool constant_b) {
  DType dtype = v.out.dtype;
  bool fast_dtype = dtype == DType::kF32 || dtype == DType::kBF16;
  bool packed = is_packed(v.a) && is_packed(v.b) && is_packed(v.out);
  // An empty operand (K = 0: every output is an empty sum, 0) is the naive loop's: oneDNN
  // 2.6 divides by the zero dim while it creates the primitive (SIGFPE; found by fuzzing).
  const bool empty = v.a.num_elements() == 0 || v.b.num_elements() == 0 || v.out.num_elements() == 0;
  if (empty) fast_dtype = false;
  // One row times constant weights: a matrix-vector product, bound by the weights' bytes,
  // which brgemm read at a seventh of the cache's speed (row_matmul.h).
  // STRIDER_CPU_ROW_MATMUL=off leaves it to oneDNN (A/B timing).
  const char* row_switch = std::getenv("STRIDER_CPU_ROW_MATMUL");
  const bool row_allowed = !row_switch || std::string_view(row_switch) != "off";
  if (row_allowed && constant_b && !empty && row_matmul_applies(v, bias).is_ok()) {
    if (!post_ops.empty())  // the callers' fallback: this product, then the post-ops as their own pass
      return unsupported(fmt::format("node '{}': a one-row product applies no post-ops", node));
    return make_row_matmul(v, bias, scale, node);
  }
  if (fast_dtype && onednn_strides_ok(v.a) && onednn_strides_ok(v.b) && onednn_strides_ok(v.out)) {
    if (std::optional<KernelPtr> banded = banded_matmul(v, bias, scale, post_ops, node, constant_b))
      return std::move(*banded);
    auto kernel = std::make_unique<OneDnnMatMul>();
    Status s = kernel->init(v, bias, scale, post_ops, node, constant_b);
    if (!s.is_ok() && s.code() != StatusCode::kUnsupported) return s;
    bool reference_only = !s.is_ok() || kernel->implementation().find(":ref") != std::string::npos;
    // A strided output that keeps oneDNN off its brgemm path is staged through dense
    // scratch when brgemm takes the dense one (hal/cpu/staged_output.h).
    if (s.is_ok() && !reference_only && !is_packed(v.out) && !is_brgemm(*kernel))
      if (std::optional<KernelPtr> staged = staged_brgemm(v, bias, scale, post_ops, node, constant_b))
        return std::move(*staged);
    // With post-ops a reference kernel is refused even over packed views: the caller has a
    // faster way (the plain matmul, then its own pass).
    if (s.is_ok() && (!reference_only || (packed && post_ops.empty()))) return KernelPtr(std::move(kernel));
  }
  if (!post_ops.empty()) return unsupported(fmt::format("node '{}': no fast oneDNN matmul applies the post-ops", node));
  // Only a slow path takes these views: refuse them when packing would avoid it.
  if (fast_dtype && !packed)
    return unsupported(fmt::format("node '{}': no fast matmul for views {} x {} -> {}", node, v.a.to_string(),
                                   v.b.to_string(), v.out.to_string()));
  if (bias) return unsupported(fmt::format("node '{}': matmul with fused bias on {}", node, dtype_name(dtype)));
  return dispatch_dtype(dtype, [&]<typename T>() -> Result<KernelPtr> {
    if constexpr (std::is_same_v<T, bool>) {
      return unsupported(fmt::format("node '{}': MatMul on bool", node));
    } else {
      return KernelPtr(new NaiveMatMul<T>(v, scale));
    }
  });
}

namespace {

Result<KernelPtr> make_matmul(const KernelRequest& r) {
  return make_matmul_of(align_matmul(r.inputs[0], r.inputs[1], r.outputs[0]), nullptr, 1.0f, r.node.name, {},
                        r.constant_input(1) != nullptr);
}

// Runs a matmul, then out = out + beta * C with C broadcast.
class GemmKernel final : public Kernel {
 public:
  GemmKernel(KernelPtr matmul, KernelPtr epilogue)
      : matmul_(std::move(matmul)), epilogue_(std::move(epilogue)) {}
  Status run(const QueueContext& context) override {
    STRIDER_RETURN_IF_ERROR(matmul_->run(context));
    return epilogue_ ? epilogue_->run(context) : Status::ok();
  }
  std::string implementation() const override {
    return matmul_->implementation() + (epilogue_ ? "+bias" : "");
  }

 private:
  KernelPtr matmul_, epilogue_;
};

Result<KernelPtr> make_gemm(const KernelRequest& r) {
  STRIDER_ASSIGN_OR_RETURN(GemmViews g, gemm_views(r.node.attributes, r.inputs[0], r.inputs[1], r.outputs[0]));
  const MatMulViews& v = g.views;
  const float alpha = g.alpha, beta = g.beta;
  bool has_c = r.has_input(2) && beta != 0.0f;
  // The common Linear case (alpha = beta = 1, C a row) fuses C as oneDNN's bias.
  if (has_c && alpha == 1.0f && beta == 1.0f) {
    TensorView c = r.inputs[2];
    while (c.rank() < 2) c = insert_unit_dim(c, 0);
    if (c.sizes[0] == 1 || c.sizes[0] == v.out.sizes[0]) {
      auto fused = make_matmul_of(v, &c, 1.0f, r.node.name, {}, r.constant_input(1) != nullptr);
      if (fused.is_ok() || fused.status().code() != StatusCode::kUnsupported) return fused;
    }
  }
  STRIDER_ASSIGN_OR_RETURN(KernelPtr matmul,
                           make_matmul_of(v, nullptr, alpha, r.node.name, {}, r.constant_input(1) != nullptr));
  KernelPtr epilogue;
  if (has_c) {
    STRIDER_ASSIGN_OR_RETURN(epilogue, dispatch_dtype(v.out.dtype, [&]<typename T>() -> Result<KernelPtr> {
      if constexpr (std::is_same_v<T, bool>) {
        return unsupported("Gemm on bool");
      } else {
        using C = ComputeType<T>;
        auto add_scaled = [beta](C acc, C c) { return C(acc + C(beta) * c); };
        return make_map_kernel<T, T, T>("Gemm.C", v.out, {v.out, r.inputs[2]}, add_scaled);
      }
    }));
  }
  return KernelPtr(new GemmKernel(std::move(matmul), std::move(epilogue)));
}

}  // namespace

void register_matmul_kernels(std::vector<KernelEntry>& table) {
  table.push_back({"MatMul", make_matmul, true});
  table.push_back({"Gemm", make_gemm, true});
}

}  // namespace strider::cpu
