// Kernels that make values from parameters alone: ConstantOfShape and Range. With static
// shapes they are constant-folded at session creation, which runs these same kernels.
#include "hal/cpu/cpu_kernels.h"
#include "hal/cpu/strided_loop.h"
#include "hal/cpu/dtype_dispatch.h"

namespace strider::cpu {
namespace {

using KernelPtr = std::unique_ptr<Kernel>;

class FillKernel final : public Kernel {
 public:
  FillKernel(TensorView out, Tensor value) : out_(std::move(out)), value_(std::move(value)) {}
  Status run(const QueueContext& context) override {
    int64_t esize = dtype_size(out_.dtype);
    Shape index(size_t(out_.rank()), 0);
    for (int64_t i = 0; i < out_.num_elements(); ++i) {
      int64_t offset = 0;
      for (size_t d = 0; d < index.size(); ++d) offset += index[d] * out_.strides[d];
      std::memcpy(out_.host_data() + offset * esize, value_.bytes(), size_t(esize));
      advance_index(index, out_.sizes);
    }
    return Status::ok();
  }
  std::string implementation() const override { return "strider:fill"; }

 private:
  TensorView out_;
  Tensor value_;
};

Result<KernelPtr> make_constant_of_shape(const KernelRequest& r) {
  Tensor value(DType::kF32, {1});
  if (const Attribute* a = r.node.attributes.find("value")) value = *a->tensor;
  if (value.dtype() != r.outputs[0].dtype)
    return internal_error("ConstantOfShape value dtype differs from its output");
  return KernelPtr(new FillKernel(r.outputs[0], std::move(value)));
}

// Range: out[i] = start + i * delta, computed in the output type (f64 for floats so a long
// float range does not drift).
template <typename T>
class RangeKernel final : public Kernel {
 public:
  RangeKernel(TensorView start, TensorView delta, TensorView out)
      : start_(std::move(start)), delta_(std::move(delta)), out_(std::move(out)) {}
  Status run(const QueueContext& context) override {
    using C = std::conditional_t<std::is_integral_v<T>, int64_t, double>;
    C start = C(load(*start_.host_data_as<T>()));
    C delta = C(load(*delta_.host_data_as<T>()));
    T* out = out_.host_data_as<T>();
    for (int64_t i = 0; i < out_.sizes[0]; ++i)
      out[i * out_.strides[0]] = store<T>(ComputeType<T>(start + C(i) * delta));
    return Status::ok();
  }
  std::string implementation() const override { return "strider:range"; }

 private:
  TensorView start_, delta_, out_;
};

Result<KernelPtr> make_range(const KernelRequest& r) {
  return dispatch_dtype(r.outputs[0].dtype, [&]<typename T>() -> Result<KernelPtr> {
    if constexpr (std::is_same_v<T, bool>) {
      return unsupported("Range on bool");
    } else {
      return KernelPtr(new RangeKernel<T>(r.inputs[0], r.inputs[2], r.outputs[0]));
    }
  });
}

}  // namespace

void register_generator_kernels(std::vector<KernelEntry>& table) {
  table.push_back({"ConstantOfShape", make_constant_of_shape});
  table.push_back({"Range", make_range});
}

}  // namespace strider::cpu
