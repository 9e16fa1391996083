// Status and Result<T>: how every fallible call in strider reports failure.
//
// Contract: no exception crosses the public API. A function that can fail returns
// Status (no value) or Result<T> (a value or a Status). Messages name what failed and
// where: the input, node, field or byte range, e.g.
//   "input 'images' dim 2: got 1600, expected 640".
// Internal invariant failures are not Statuses: they abort through STRIDER_CHECK
// (src/base/check.h), because continuing would risk a silently wrong answer.
#pragma once

#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace strider {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // the caller's input is wrong (shape, dtype, option, file content)
  kInvalidModel,     // the model is malformed (truncated, dangling value, bad attribute)
  kUnsupported,      // the model is valid but uses something strider does not implement
  kOutOfRange,       // an index, view or byte range leaves its bounds
  kNotFound,         // a named file, input or output does not exist
  kIoError,          // reading or writing a file failed
  kDeviceError,      // a device or library call failed at run time
  kInternal,         // a bug in strider reported without aborting
  kHazard,           // the sanitizer found accesses no wait orders (one finding per line)
  kResourceExhausted,  // the memory budget (or the machine's memory) cannot hold what is asked
};

// "INVALID_ARGUMENT", "UNSUPPORTED", ...: the spelling used in error lines.
std::string_view status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  // Control bytes in `message` are escaped (only a HAZARD report keeps its newlines, one
  // finding per line) and a message longer than kMaxMessageBytes is cut: a Status prints
  // as one line whatever text from a model was formatted into it.
  Status(StatusCode code, std::string message);
  static constexpr size_t kMaxMessageBytes = 1536;

  static Status ok() { return Status(); }
  bool is_ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: input 'x' dim 0: got 3, expected 2"
  std::string to_string() const;
  // Prefix the message with context, keeping the code: "node 'Conv_3': " + message.
  Status with_context(std::string_view context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

Status invalid_argument(std::string message);
Status invalid_model(std::string message);
Status unsupported(std::string message);
Status out_of_range(std::string message);
Status not_found(std::string message);
Status io_error(std::string message);
Status device_error(std::string message);
Status internal_error(std::string message);
Status resource_exhausted(std::string message);

// A value or the Status that explains why there is none. Accessing the value of an
// error Result aborts (it is a programming error, like dereferencing an empty optional).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : state_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    if (std::get<Status>(state_).is_ok()) std::abort();  // an ok Status carries no value
  }

  bool is_ok() const { return std::holds_alternative<T>(state_); }
  const Status& status() const {
    static const Status kOk;
    return is_ok() ? kOk : std::get<Status>(state_);
  }
  T& value() & { return checked(); }
  const T& value() const& { return const_cast<Result*>(this)->checked(); }
  T&& value() && { return std::move(checked()); }
  T* operator->() { return &checked(); }
  const T* operator->() const { return &const_cast<Result*>(this)->checked(); }
  T& operator*() & { return checked(); }
  const T& operator*() const& { return const_cast<Result*>(this)->checked(); }

 private:
  T& checked() {
    if (!is_ok()) std::abort();
    return std::get<T>(state_);
  }
  std::variant<T, Status> state_;
};

}  // namespace strider

#define STRIDER_CONCAT_INNER_(a, b) a##b
#define STRIDER_CONCAT_(a, b) STRIDER_CONCAT_INNER_(a, b)

// Return the Status of `expr` from the enclosing function if it is an error.
#define STRIDER_RETURN_IF_ERROR(expr)                         \
  do {                                                        \
    ::strider::Status strider_status_ = ::strider::to_status(expr); \
    if (!strider_status_.is_ok()) return strider_status_;     \
  } while (0)

// `STRIDER_ASSIGN_OR_RETURN(auto x, make_x());` declares x from a Result or returns its error.
// The expression may contain commas (template arguments).
#define STRIDER_ASSIGN_OR_RETURN(lhs, ...) \
  STRIDER_ASSIGN_OR_RETURN_IMPL_(STRIDER_CONCAT_(strider_result_, __COUNTER__), lhs, __VA_ARGS__)
#define STRIDER_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, ...) \
  auto tmp = (__VA_ARGS__);                             \
  if (!tmp.is_ok()) return tmp.status();               \
  lhs = std::move(tmp).value()

namespace strider {
inline const Status& to_status(const Status& s) { return s; }
template <typename T>
const Status& to_status(const Result<T>& r) {
  return r.status();
}
}  // namespace strider
