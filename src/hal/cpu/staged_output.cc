#include "hal/cpu/staged_output.h"

#include <algorithm>
#include <new>
#include <numeric>

#include "hal/cpu/copy.h"

namespace strider::cpu {

void AlignedFree::operator()(std::byte* p) const { ::operator delete(p, std::align_val_t(64)); }

KernelScratch make_kernel_scratch(int64_t bytes, const char* label) {
  bytes = std::max<int64_t>(bytes, 1);
  KernelScratch s;
  s.bytes.reset(static_cast<std::byte*>(::operator new(size_t(bytes), std::align_val_t(64))));
  s.allocation = std::make_unique<Allocation>(0, label, "cpu", s.bytes.get(), bytes, 64, StorageMode::kHost, true);
  return s;
}

Result<StagedOutput> stage_output(const TensorView& out) {
  StagedOutput staged;
  const int64_t bytes = std::max<int64_t>(out.num_elements(), 1) * int64_t(dtype_size(out.dtype));
  staged.scratch = make_kernel_scratch(bytes, "staged-output");
  STRIDER_ASSIGN_OR_RETURN(staged.dense, make_view(*staged.scratch.allocation, 0, out.dtype, out.sizes,
                                                   dense_strides_in_order_of(out.sizes, out.strides), "staged"));
  return staged;
}

namespace {

class StagedKernel final : public Kernel {
 public:
  StagedKernel(std::unique_ptr<Kernel> inner, StagedOutput staged, TensorView out)
      : inner_(std::move(inner)), staged_(std::move(staged)), out_(std::move(out)) {}
  Status run(const QueueContext& context) override {
    STRIDER_RETURN_IF_ERROR(inner_->run(context));
    copy_view(out_, staged_.dense);
    return Status::ok();
  }
  Status check_completed() override { return inner_->check_completed(); }
  std::string implementation() const override { return inner_->implementation() + " into dense, then copied"; }

 private:
  std::unique_ptr<Kernel> inner_;
  StagedOutput staged_;
  TensorView out_;
};

}  // namespace

std::unique_ptr<Kernel> make_staged_kernel(std::unique_ptr<Kernel> inner, StagedOutput staged, const TensorView& out) {
  return std::make_unique<StagedKernel>(std::move(inner), std::move(staged), out);
}

}  // namespace strider::cpu
