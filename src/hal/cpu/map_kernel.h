// MapKernel: out[i] = fn(in0[i], in1[i], ...) over arbitrary strides, with every input
// broadcast (stride 0) to the output's sizes. The building block of all elementwise ops.
// Each input has its own storage type (Where reads bool and T; Pow a base and exponent).
//
// Everything but the row loop lives in MapKernelBase (map_kernel.cc): the elementwise
// table and Cast instantiate this template for hundreds of functor x dtype pairs, and
// each copy of the operand bookkeeping and the strided loop nest cost compile time (the
// sanitizer builds spent minutes here) without making any run faster.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "hal/cpu/dtype_dispatch.h"
#include "hal/cpu/strided_loop.h"
#include "hal/kernel.h"

namespace strider::cpu {

// The operands and the loop; `row_` computes one innermost run (the typed part).
class MapKernelBase : public Kernel {
 public:
  // A StridedRow<N> for some N, cast to one function pointer type (and back before the call).
  using AnyRow = void (*)();
  // row: a StridedRow<ins.size() + 1> called with `this` as its context.
  MapKernelBase(std::string name, TensorView out, std::vector<TensorView> ins, std::vector<int64_t> element_sizes,
                AnyRow row);
  Status run(const QueueContext& context) final;
  std::string implementation() const final;

 private:
  template <size_t N>
  void run_with() const;

  std::string name_;
  TensorView out_;
  std::vector<TensorView> ins_;
  std::vector<int64_t> element_sizes_;  // output first
  AnyRow row_;
};

template <typename Fn, typename TOut, typename... TIns>
class MapKernel final : public MapKernelBase {
  static constexpr size_t kOperands = sizeof...(TIns) + 1;

 public:
  MapKernel(std::string name, TensorView out, std::vector<TensorView> ins, Fn fn)
      : MapKernelBase(std::move(name), std::move(out), std::move(ins),
                      {int64_t(sizeof(TOut)), int64_t(sizeof(TIns))...},
                      reinterpret_cast<AnyRow>(&MapKernel::row)),
        fn_(fn) {}

 private:
  static void row(const void* self, const std::array<std::byte*, kOperands>& p, int64_t n,
                  const std::array<int64_t, kOperands>& s) {
    static_cast<const MapKernel*>(static_cast<const MapKernelBase*>(self))
        ->apply(p, n, s, std::index_sequence_for<TIns...>{});
  }

  template <size_t... K>
  void apply(const std::array<std::byte*, kOperands>& p, int64_t n, const std::array<int64_t, kOperands>& s,
             std::index_sequence<K...>) const {
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

  Fn fn_;
};

// Broadcasts each input view to `out`'s sizes (INVALID_ARGUMENT naming the kernel when
// one does not broadcast).
Result<std::vector<TensorView>> broadcast_map_inputs(std::span<const TensorView> ins, const TensorView& out);

// Broadcasts each input view to `out`'s sizes and makes the kernel.
template <typename TOut, typename... TIns, typename Fn>
Result<std::unique_ptr<Kernel>> make_map_kernel(std::string name, const TensorView& out,
                                                const std::array<TensorView, sizeof...(TIns)>& ins,
                                                Fn fn) {
  STRIDER_ASSIGN_OR_RETURN(std::vector<TensorView> broadcast, broadcast_map_inputs(ins, out));
  return std::unique_ptr<Kernel>(
      new MapKernel<Fn, TOut, TIns...>(std::move(name), out, std::move(broadcast), fn));
}

}  // namespace strider::cpu
