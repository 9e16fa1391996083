// MatMul and Gemm on the GPU through cuBLASLt, over the views as they are: Gemm's
// transposes are permuted views, a column chunk is a leading dimension. Small products
// (small_matmul.h) are also offered to strider's own kernel, and the faster one is kept.
#include <fmt/format.h>

#include "hal/cuda/cuda_kernels.h"
#include "hal/cuda/epilogue.h"
#include "hal/cuda/lt_matmul.h"
#include "hal/cuda/mma_matmul.h"
#include "hal/cuda/small_matmul.h"
#include "hal/cuda/timed_choice.h"

namespace strider::cuda {
namespace {

// What the choice between cuBLASLt and the small product depends on: the views, where
// they start (cuBLASLt's algorithms differ by alignment), the scale and the program.
std::string product_key(const MatMulViews& v, float scale, const FusedProgram* program,
                        const std::vector<TensorView>& operands, int ordinal) {
  auto operand = [](const TensorView& t) {
    return fmt::format("{}:{}@{}", t.to_string(), dtype_name(t.dtype),
                       uintptr_t(t.allocation->address() + t.byte_offset) % 256);
  };
  std::string key = fmt::format("Product dev{} {} x {} -> {} scale {}", ordinal, operand(v.a), operand(v.b),
                                operand(v.out), scale);
  if (program) key.append(" then ").append(describe_fused_program(*program));
  for (const TensorView& o : operands) key.append(" ").append(operand(o));
  return key;
}

// The library's kernel and strider's own (the small products, the tensor-core product),
// timed (timed_choice.h) when there are several. A view cuBLASLt cannot take is no loss
// where one of strider's takes it.
Result<std::unique_ptr<Kernel>> fastest_product(const std::string& key, Result<std::unique_ptr<Kernel>> library,
                                                std::vector<std::unique_ptr<Kernel>> small) {
  if (small.empty()) return library;
  if (library.is_ok()) small.insert(small.begin(), std::move(*library));
  else if (library.status().code() != StatusCode::kUnsupported) return library;
  return fastest_kernel(key, std::move(small));
}

// The small products and the tensor-core product for a MatMul or FusedMatMul node.
std::vector<std::unique_ptr<Kernel>> own_products(const KernelRequest& r, const MatMulViews& views,
                                                  const FusedProgram* program, const std::vector<TensorView>& operands) {
  std::vector<std::unique_ptr<Kernel>> kernels = small_matmul_kernels(views, 1.0f, program, operands);
  for (std::unique_ptr<Kernel>& k : mma_matmul_kernels(r, views, program, operands)) kernels.push_back(std::move(k));
  return kernels;
}

Result<std::unique_ptr<Kernel>> make_matmul(const KernelRequest& r, const CudaContext& context) {
  const MatMulViews views = align_matmul(r.inputs[0], r.inputs[1], r.outputs[0]);
  return fastest_product(product_key(views, 1.0f, nullptr, {}, context.ordinal),
                         make_lt_matmul(views, nullptr, 1.0f, context, r.node.name),
                         own_products(r, views, nullptr, {}));
}

// Gemm: alpha * A' x B' (+ beta * C). C is fused as cuBLASLt's bias when it is a row added
// with alpha = beta = 1 (torch's Linear); any other C (a scalar, a column, a matrix) is
// broadcast into the output first and accumulated by cuBLASLt with beta.
Result<std::unique_ptr<Kernel>> make_gemm(const KernelRequest& r, const CudaContext& context) {
  STRIDER_ASSIGN_OR_RETURN(GemmViews g, gemm_views(r.node.attributes, r.inputs[0], r.inputs[1], r.outputs[0]));
  const MatMulViews& v = g.views;
  const float alpha = g.alpha, beta = g.beta;
  if (!r.has_input(2) || beta == 0.0f)
    return fastest_product(product_key(v, alpha, nullptr, {}, context.ordinal),
                           make_lt_matmul(v, nullptr, alpha, context, r.node.name),
                           small_matmul_kernels(v, alpha, nullptr, {}));
  TensorView c = r.inputs[2];
  while (c.rank() < 2) c = insert_unit_dim(c, 0);
  // The bias epilogue adds a full row [1, N] (torch's Linear); any other C is copied into
  // the output and accumulated with beta.
  if (alpha == 1.0f && beta == 1.0f && c.sizes[0] == 1 && c.sizes[1] == v.out.sizes[1]) {
    const FusedProgram add = added_operand_program();
    return fastest_product(product_key(v, 1.0f, &add, {c}, context.ordinal),
                           make_lt_matmul(v, &c, 1.0f, context, r.node.name),
                           small_matmul_kernels(v, 1.0f, &add, {c}));
  }
  return make_lt_matmul(v, nullptr, alpha, context, r.node.name, &c, beta);
}

// The bias row and the addend of a FusedMatMul program that only adds them to A x B
// (BERT's and GPT-2's Linear + residual), as cuBLASLt takes them: its bias epilogue and
// its C. False when the program is anything else or an operand does not fit.
bool as_lt_epilogue(const FusedProgram& program, const std::vector<TensorView>& operands, const TensorView& out,
                    std::optional<TensorView>* bias, const TensorView** addend) {
  std::optional<std::vector<int>> added = as_added_operands(program);
  if (!added) return false;
  for (int reg : *added) {
    const TensorView& v = operands[size_t(reg - 1)];
    if (v.dtype != out.dtype) return false;
    if (!*bias && is_bias_row(v, out)) {
      *bias = TensorView{v.allocation, v.byte_offset, v.dtype, {1, out.sizes.back()}, {0, 1}};
    } else if (!*addend && has_layout_of(v, out)) {
      *addend = &v;
    } else {
      return false;
    }
  }
  return true;
}

// FusedMatMul through cuBLASLt: A x B, then its program (ops/fused_elementwise.h): inside
// cuBLASLt when it is a bias row and an addend added, else as one map over the output in
// place after it.
Result<std::unique_ptr<Kernel>> library_fused_matmul(const KernelRequest& r, const CudaContext& context,
                                                     const MatMulViews& views, const FusedProgram& program,
                                                     const std::vector<TensorView>& operands) {
  std::optional<TensorView> bias;
  const TensorView* addend = nullptr;
  if (as_lt_epilogue(program, operands, views.out, &bias, &addend)) {
    auto fused = make_lt_matmul(views, bias ? &*bias : nullptr, 1.0f, context, r.node.name, addend, 1.0f);
    if (fused.is_ok() || fused.status().code() != StatusCode::kUnsupported) return fused;
  }
  STRIDER_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> product, make_lt_matmul(views, nullptr, 1.0f, context, r.node.name));
  Result<std::unique_ptr<Kernel>> kernel = then_program(std::move(product), program, r.outputs[0], operands);
  if (!kernel.is_ok()) return kernel.status().with_context(fmt::format("node '{}'", r.node.name));
  return kernel;
}

// FusedMatMul: the library's product and program, or the small product with the program
// in its epilogue.
Result<std::unique_ptr<Kernel>> make_fused_matmul(const KernelRequest& r, const CudaContext& context) {
  const MatMulViews views = align_matmul(r.inputs[0], r.inputs[1], r.outputs[0]);
  STRIDER_ASSIGN_OR_RETURN(FusedProgram program, read_fused_program_of(r.node, int(r.inputs.size()) - 1));
  const std::vector<TensorView> operands(r.inputs.begin() + 2, r.inputs.end());
  return fastest_product(product_key(views, 1.0f, &program, operands, context.ordinal),
                         library_fused_matmul(r, context, views, program, operands),
                         own_products(r, views, &program, operands));
}

}  // namespace

void register_matmul_kernels(std::vector<KernelEntry>& table) {
  table.push_back({"MatMul", make_matmul});
  table.push_back({"Gemm", make_gemm});
  table.push_back({kFusedMatMulOp, make_fused_matmul});
}

}  // namespace strider::cuda
