#include "hal/cuda/mma_matmul.h"

#include <fmt/format.h>

#include <cstdlib>
#include <optional>
#include <span>
#include <string_view>

#include "hal/cuda/cuda_kernels.h"
#include "hal/cuda/device_buffer.h"
#include "hal/cuda/epilogue.h"
#include "hal/cuda/mma_conv.h"
#include "hal/cuda/mma_gemm.h"

namespace strider::cuda {
namespace {

// What the program adds to the product: a bias row (its host values), an activation with
// its constants, and addends read with out's layout.
struct MatMulEpilogue {
  const Tensor* bias = nullptr;
  ConvEpilogue activation;
  std::vector<TensorView> addends;
};

// Program register `reg` (>= 1) as a one-element constant's value.
std::optional<float> scalar_constant(const KernelRequest& r, int reg) {
  const Tensor* t = r.constant_input(size_t(reg) + 1);
  if (!t || t->num_elements() != 1) return std::nullopt;
  return float(t->element_as_double(0));
}

// Register `reg` as a constant bias row of out: its host values.
const Tensor* constant_bias_row(const KernelRequest& r, const std::vector<TensorView>& operands, int reg,
                                const TensorView& out) {
  const Tensor* t = r.constant_input(size_t(reg) + 1);
  const TensorView& v = operands[size_t(reg) - 1];
  if (!t || v.dtype != out.dtype || !is_bias_row(v, out) || t->num_elements() != out.sizes.back()) return nullptr;
  return t;
}

// Added operands: one constant bias row and up to kMaxMmaConvAddends addends.
bool added_epilogue(const KernelRequest& r, const std::vector<int>& added, const std::vector<TensorView>& operands,
                    const TensorView& out, MatMulEpilogue* e) {
  for (int reg : added) {
    const TensorView& v = operands[size_t(reg) - 1];
    if (!e->bias && (e->bias = constant_bias_row(r, operands, reg, out))) continue;
    if (v.dtype != out.dtype || !has_layout_of(v, out) || (may_overlap(v, out) && !same_view(v, out)) ||
        e->addends.size() >= size_t(kMaxMmaConvAddends))
      return false;
    e->addends.push_back(v);
  }
  return true;
}

// BERT's GELU after its bias, as the fusion passes write it for a FusedMatMul (the product
// is register 0, the bias register 1, either order in the sum).
bool gelu_erf_epilogue(const KernelRequest& r, const FusedProgram& program, const std::vector<TensorView>& operands,
                       const TensorView& out, MatMulEpilogue* e) {
  const std::string text = describe_fused_program(program);
  bool matched = false;
  for (const char* sum : {"Add(x0, x1)", "Add(x1, x0)"})
    matched = matched || text == fmt::format("Mul(Mul({0}, Add(Erf(Div({0}, x2)), x3)), x4)", sum);
  if (!matched || program.inputs != 5) return false;
  e->bias = constant_bias_row(r, operands, 1, out);
  e->activation.activation = ConvActivation::kGeluErf;
  for (int reg = 2; reg < 5; ++reg) {
    std::optional<float> k = scalar_constant(r, reg);
    if (!k) return false;
    e->activation.k[reg - 2] = *k;
  }
  return e->bias != nullptr;
}

// GPT-2's tanh GELU after its bias (kBiasGeluTanhExpression, launch.h, through the operand
// order that makes the program that text).
bool gelu_tanh_epilogue(const KernelRequest& r, const FusedProgram& program, const std::vector<TensorView>& operands,
                        const TensorView& out, MatMulEpilogue* e) {
  std::optional<std::vector<int>> order = compiled_form_order(program);
  if (!order || program.inputs != 6 ||
      describe_fused_program(with_operand_order(program, *order)) != kBiasGeluTanhExpression)
    return false;
  const std::vector<int>& o = *order;
  if (o[0] != 0 && o[1] != 0) return false;
  e->bias = constant_bias_row(r, operands, o[0] == 0 ? o[1] : o[0], out);
  e->activation.activation = ConvActivation::kGeluTanh;
  for (int k = 0; k < 4; ++k) {
    std::optional<float> value = scalar_constant(r, o[size_t(k) + 2]);
    if (!value) return false;
    e->activation.k[k] = *value;
  }
  return e->bias != nullptr;
}

std::optional<MatMulEpilogue> epilogue_of(const KernelRequest& r, const FusedProgram* program,
                                          const std::vector<TensorView>& operands, const TensorView& out) {
  MatMulEpilogue e;
  if (!program) return e;
  if (std::optional<std::vector<int>> added = as_added_operands(*program))
    return added_epilogue(r, *added, operands, out, &e) ? std::optional(e) : std::nullopt;
  if (std::optional<ConvEpilogue> activation = conv_epilogue_of(*program)) {
    e.activation = *activation;
    return e;
  }
  if (gelu_erf_epilogue(r, *program, operands, out, &e) || gelu_tanh_epilogue(r, *program, operands, out, &e)) return e;
  return std::nullopt;
}

const std::byte* view_start(const TensorView& v) { return v.allocation->address() + v.byte_offset; }

// The product as the pointwise convolution's geometry: pixels (n, 1, M) of K channels in,
// N channels out. False where a view is not the kernel's.
bool set_product_geometry(const MatMulViews& v, MmaConvArgs& a) {
  const size_t r = size_t(v.out.rank());
  if (r < 2 || r > 3 || v.a.dtype != v.out.dtype || v.b.dtype != v.out.dtype) return false;
  if (v.out.dtype != DType::kBF16 && v.out.dtype != DType::kF16) return false;
  const int64_t batch = r == 3 ? v.out.sizes[0] : 1, m = v.out.sizes[r - 2], n = v.out.sizes[r - 1], k = v.a.sizes[r - 1];
  if ((r == 3 && (v.a.sizes[0] != batch || v.b.sizes[0] != 1)) || batch * m >= int64_t(INT32_MAX) || n >= int64_t(INT32_MAX) ||
      k >= int64_t(INT32_MAX) || k % 8 != 0 || batch * m * n == 0)
    return false;
  const int64_t xn[4] = {batch, k, 1, m}, xs[4] = {r == 3 ? v.a.strides[0] : 0, v.a.strides[r - 1], 0, v.a.strides[r - 2]};
  const int64_t yn[4] = {batch, n, 1, m}, ys[4] = {r == 3 ? v.out.strides[0] : 0, v.out.strides[r - 1], 0, v.out.strides[r - 2]};
  if (!mma_conv_rows(xn, xs, v.a.byte_offset / dtype_size(v.a.dtype), 8) || !mma_conv_rows(yn, ys, 0, 1)) return false;
  if (reinterpret_cast<uintptr_t>(view_start(v.a)) % 16 != 0 || (n > 1 && ys[1] != 1) || (k > 1 && xs[1] != 1)) return false;
  a.n = int32_t(batch), a.c = int32_t(k), a.h = 1, a.w = int32_t(m), a.oh = 1, a.ow = int32_t(m);
  a.k = int32_t(n);
  a.c_pad = int32_t((k + kMmaConvTile - 1) / kMmaConvTile * kMmaConvTile);
  for (size_t i = 0; i < 4; ++i) a.xs[i] = xs[i], a.ys[i] = ys[i];
  a.x = view_start(v.a);
  a.y = const_cast<std::byte*>(view_start(v.out));
  return true;
}

// B's constant as a kernel's weights: T [rows_pad][k_pad], row j holding column j of B (its
// own bits), zeros past N and K. B's view is [K, N] dense or its transpose over the
// constant's elements.
std::optional<std::vector<uint16_t>> packed_weights(const Tensor& constant, const TensorView& b, int64_t k, int64_t n,
                                                    int64_t rows_pad, int64_t k_pad) {
  const size_t r = size_t(b.rank());
  const int64_t row = b.strides[r - 2], col = b.strides[r - 1];
  if (constant.dtype() != b.dtype || constant.num_elements() != k * n) return std::nullopt;
  if (!((row == n && (col == 1 || n == 1)) || (col == k && (row == 1 || k == 1)))) return std::nullopt;
  const auto* source = reinterpret_cast<const uint16_t*>(constant.bytes());
  std::vector<uint16_t> w(size_t(rows_pad * k_pad), 0);
  for (int64_t o = 0; o < n; ++o)
    for (int64_t i = 0; i < k; ++i) w[size_t(o * k_pad + i)] = source[i * row + o * col];
  return w;
}

// The bias as f32 [padded], zeros past N.
std::vector<float> padded_bias(const Tensor& bias, int64_t n, int64_t padded) {
  std::vector<float> b(size_t(padded), 0.0f);
  for (int64_t o = 0; o < n; ++o) b[size_t(o)] = float(bias.element_as_double(o));
  return b;
}

bool programmed(const MatMulEpilogue& e) {
  return e.bias || e.activation.activation != ConvActivation::kNone || !e.addends.empty();
}

// Either kernel's constants on the device: B packed as T [rows_pad][k_pad], the bias (where
// the epilogue has one) as f32 [rows_pad]; and its name, "+program" where it applies one.
struct ProductConstants {
  DeviceBuffer weights, bias;
  bool with_program = false;

  Status upload(const Tensor& constant, const TensorView& b, const MatMulEpilogue& e, int64_t k, int64_t n,
                int64_t rows_pad, int64_t k_pad) {
    std::optional<std::vector<uint16_t>> w = packed_weights(constant, b, k, n, rows_pad, k_pad);
    if (!w) return unsupported("tensor-core product: weights");
    STRIDER_RETURN_IF_ERROR(weights.upload(std::as_bytes(std::span(*w))));
    with_program = programmed(e);
    if (!e.bias) return Status::ok();
    const std::vector<float> padded = padded_bias(*e.bias, n, rows_pad);
    return bias.upload(std::as_bytes(std::span(padded)));
  }
  const float* bias_or_null(const MatMulEpilogue& e) const { return e.bias ? bias.as<float>() : nullptr; }
  std::string name(const char* kernel) const { return with_program ? std::string(kernel) + "+program" : kernel; }
};

class MmaMatMul final : public Kernel {
 public:
  Status init(const MatMulViews& v, const Tensor& weights, const MatMulEpilogue& e) {
    MmaConvArgs& a = launch_.args;
    if (!set_product_geometry(v, a)) return unsupported("tensor-core product: views");
    const int64_t rows_pad = mma_conv_tiles(a) * kMmaConvTile;
    STRIDER_RETURN_IF_ERROR(constants_.upload(weights, v.b, e, a.c, a.k, rows_pad, a.c_pad));
    a.weights = constants_.weights.as<void>();
    a.bias = constants_.bias_or_null(e);
    a.epilogue = e.activation;
    for (const TensorView& addend : e.addends) a.addends[a.addend_count++] = view_start(addend);
    a.chunk_stores = a.k % 8 == 0 && mma_conv_rows({a.n, a.k, 1, a.ow}, a.ys, int64_t(reinterpret_cast<uintptr_t>(a.y) / 2), 8);
    for (int i = 0; i < a.addend_count; ++i)
      a.chunk_stores = a.chunk_stores && reinterpret_cast<uintptr_t>(a.addends[i]) % 16 == 0;
    return prepare_mma_conv(v.out.dtype, &launch_);
  }
  Status run(const QueueContext& queue) override { return run_mma_conv(launch_, stream_of(queue)); }
  std::string implementation() const override { return constants_.name("strider-cuda:mma-gemm-64"); }

 private:
  MmaConvLaunch launch_;
  ProductConstants constants_;
};

// The pipelined product (mma_gemm.h) over the same views.
class MmaGemm final : public Kernel {
 public:
  Status init(const MatMulViews& v, const Tensor& weights, const MatMulEpilogue& e) {
    MmaConvArgs geometry;
    if (!set_product_geometry(v, geometry)) return unsupported("tensor-core product: views");
    MmaGemmArgs& a = launch_.args;
    a.batch = geometry.n, a.rows = geometry.w, a.n = geometry.k, a.k = geometry.c;
    a.a_batch = geometry.xs[0], a.a_row = geometry.xs[3], a.y_batch = geometry.ys[0], a.y_row = geometry.ys[3];
    a.a = geometry.x, a.y = geometry.y;
    a.k_pad = int32_t(mma_gemm_k_pad(a.k));
    STRIDER_RETURN_IF_ERROR(constants_.upload(weights, v.b, e, a.k, a.n, mma_gemm_n_pad(a.n), a.k_pad));
    a.weights = constants_.weights.as<void>();
    a.bias = constants_.bias_or_null(e);
    a.epilogue = e.activation;
    for (const TensorView& addend : e.addends) a.addends[a.addend_count++] = view_start(addend);
    return prepare_mma_gemm(v.out.dtype, &launch_);
  }
  Status run(const QueueContext& queue) override { return run_mma_gemm(launch_, stream_of(queue)); }
  std::string implementation() const override { return constants_.name("strider-cuda:mma-gemm-128"); }

 private:
  MmaGemmLaunch launch_;
  ProductConstants constants_;
};

}  // namespace

std::vector<std::unique_ptr<Kernel>> mma_matmul_kernels(const KernelRequest& r, const MatMulViews& views,
                                                        const FusedProgram* program,
                                                        const std::vector<TensorView>& operands) {
  std::vector<std::unique_ptr<Kernel>> kernels;
  const char* offer = std::getenv("STRIDER_CUDA_MMA_MATMUL");
  if (!offer || std::string_view(offer) != "on") return kernels;
  const Tensor* weights = r.constant_input(1);
  if (!weights) return kernels;
  std::optional<MatMulEpilogue> epilogue = epilogue_of(r, program, operands, views.out);
  if (!epilogue) return kernels;
  auto pipelined = std::make_unique<MmaGemm>();
  if (pipelined->init(views, *weights, *epilogue).is_ok()) kernels.push_back(std::move(pipelined));
  auto pointwise = std::make_unique<MmaMatMul>();
  if (pointwise->init(views, *weights, *epilogue).is_ok()) kernels.push_back(std::move(pointwise));
  return kernels;
}

}  // namespace strider::cuda
