// Internal invariants. A failed STRIDER_CHECK means strider itself is wrong; it prints
// the condition, the place and a message, then aborts, because continuing could return
// a silently wrong answer. User-caused failures are Statuses, never checks.
#pragma once

#include <fmt/format.h>

#include <string>

namespace strider::detail {
[[noreturn]] void check_failed(const char* condition, const char* file, int line,
                               const std::string& message);
}  // namespace strider::detail

// STRIDER_CHECK(cond, "format {}", args...): the message is optional.
#define STRIDER_CHECK(cond, ...)                                                      \
  do {                                                                                \
    if (!(cond)) [[unlikely]]                                                         \
      ::strider::detail::check_failed(#cond, __FILE_NAME__, __LINE__,                      \
                                      ::strider::detail::check_message(__VA_ARGS__)); \
  } while (0)

namespace strider::detail {
inline std::string check_message() { return {}; }
template <typename... Args>
std::string check_message(fmt::format_string<Args...> format, Args&&... args) {
  return fmt::format(format, std::forward<Args>(args)...);
}
}  // namespace strider::detail
