// CacheAlignedVector: a std::vector whose storage starts on a 64-byte cache line.
//
// Why: a kernel's scratch rows (a fused program's tile registers, attention's packed keys)
// are read and written with full-width vector loads and stores. From plain operator new they
// start wherever the heap puts them (16-byte aligned), so on one process every 64-byte
// AVX-512 access may straddle two cache lines and on the next none does: the same binary
// measured two speeds per process (a gated chain's fused steps 16.6 or 25.8 us). Aligned
// scratch makes the fast case the only one.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace strider {

inline constexpr std::size_t kCacheLine = 64;

template <class T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(kCacheLine)));
  }
  void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, std::align_val_t(kCacheLine)); }
  template <class U>
  bool operator==(const CacheLineAllocator<U>&) const noexcept { return true; }
};

template <class T>
using CacheAlignedVector = std::vector<T, CacheLineAllocator<T>>;

// `n` rounded up to whole cache lines of T: the stride of per-thread scratch in one
// CacheAlignedVector, so no two threads write one line (a line written by two cores moves
// between them at every write: the gated chain's fused steps ran 1.1x faster on two
// threads than on one while their register pointers shared a line, 1.9x after).
template <class T>
constexpr std::size_t cache_lines_of(std::size_t n) {
  constexpr std::size_t per_line = kCacheLine / sizeof(T) > 0 ? kCacheLine / sizeof(T) : 1;
  return (n + per_line - 1) / per_line * per_line;
}

}  // namespace strider
