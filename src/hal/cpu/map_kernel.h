// MapKernel: out[i] = fn(in0[i], in1[i], ...) over arbitrary strides, with every input
// broadcast (stride 0) to the output's sizes. The building block of all elementwise ops.
// Each input has its own storage type (Where reads bool and T; Pow a base and exponent).
#pragma once

#include <array>
#include <memory>
#include <string>
#include <tuple>
#include <utility>

#include "hal/cpu/dtype_dispatch.h"
#include "hal/cpu/strided_loop.h"
#include "hal/kernel.h"

namespace strider::cpu {

template <typename Fn, typename TOut, typename... TIns>
class MapKernel final : public Kernel {
  static constexpr size_t kArity = sizeof...(TIns);

 public:
  MapKernel(std::string name, TensorView out, std::array<TensorView, kArity> ins, Fn fn)
      : name_(std::move(name)), out_(std::move(out)), ins_(std::move(ins)), fn_(fn) {}

  Status run(const QueueContext& context) override {
    StridedOperands<kArity + 1> ops;
    ops.base[0] = out_.host_data();
    ops.strides[0] = out_.strides.data();
    ops.element_size = {int64_t(sizeof(TOut)), int64_t(sizeof(TIns))...};
    for (size_t k = 0; k < kArity; ++k) {
      ops.base[k + 1] = ins_[k].host_data();
      ops.strides[k + 1] = ins_[k].strides.data();
    }
    // Elements are independent (an in-place map reads each element before writing it).
    parallel_for_each_strided(out_.sizes, ops, 1, [this](const auto& p, int64_t n, const auto& s, int) {
      apply(p, n, s, std::index_sequence_for<TIns...>{});
    });
    return Status::ok();
  }
  std::string implementation() const override { return "strider:" + name_; }

 private:
  template <size_t... K>
  void apply(const std::array<std::byte*, kArity + 1>& p, int64_t n,
             const std::array<int64_t, kArity + 1>& s, std::index_sequence<K...>) const {
    TOut* out = reinterpret_cast<TOut*>(p[0]);
    bool dense = s[0] == int64_t(sizeof(TOut)) && ((s[K + 1] == int64_t(sizeof(TIns))) && ...);
    if (dense) {
      // A separate loop so the compiler can vectorize the common dense case.
      std::tuple<const TIns*...> in{reinterpret_cast<const TIns*>(p[K + 1])...};
      for (int64_t i = 0; i < n; ++i) out[i] = store<TOut>(fn_(load(std::get<K>(in)[i])...));
      return;
    }
    for (int64_t i = 0; i < n; ++i) {
      TOut* o = reinterpret_cast<TOut*>(p[0] + i * s[0]);
      *o = store<TOut>(fn_(load(*reinterpret_cast<const TIns*>(p[K + 1] + i * s[K + 1]))...));
    }
  }

  std::string name_;
  TensorView out_;
  std::array<TensorView, kArity> ins_;
  Fn fn_;
};

// Broadcasts each input view to `out`'s sizes and makes the kernel.
template <typename TOut, typename... TIns, typename Fn>
Result<std::unique_ptr<Kernel>> make_map_kernel(std::string name, const TensorView& out,
                                                const std::array<TensorView, sizeof...(TIns)>& ins,
                                                Fn fn) {
  std::array<TensorView, sizeof...(TIns)> broadcast;
  for (size_t k = 0; k < ins.size(); ++k) {
    STRIDER_ASSIGN_OR_RETURN(broadcast[k], broadcast_view(ins[k], out.sizes));
  }
  return std::unique_ptr<Kernel>(
      new MapKernel<Fn, TOut, TIns...>(std::move(name), out, std::move(broadcast), fn));
}

}  // namespace strider::cpu
