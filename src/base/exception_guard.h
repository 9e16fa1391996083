// The exception boundary: strider's own code reports failure with Status, but it calls
// libraries that throw (the standard library's allocators and containers, oneDNN,
// protobuf), and a hostile model is exactly what makes them throw. Every entry point
// (Session::load, create_session, run, each queue's commands, the CLI's main) runs its
// work through guard(), so no exception escapes: std::bad_alloc becomes
// RESOURCE_EXHAUSTED, anything else INTERNAL, both naming `context` (the node or step).
#pragma once

#include <fmt/format.h>

#include <exception>
#include <new>
#include <string_view>

#include "strider/status.h"

namespace strider {

// `f` returns a Status or a Result<T>; guard returns the same type.
template <typename F>
auto guard(std::string_view context, F&& f) -> decltype(f()) {
  auto prefix = [&] { return context.empty() ? std::string() : std::string(context) + ": "; };
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return resource_exhausted(prefix() + "out of memory");
  } catch (const std::exception& e) {
    return internal_error(fmt::format("{}unexpected exception: {}", prefix(), e.what()));
  } catch (...) {
    return internal_error(prefix() + "unexpected exception");
  }
}

}  // namespace strider
