#include "strider/status.h"

#include <cstdio>
#include <cstdlib>

#include "base/check.h"
#include "strider/printable.h"

namespace strider {

std::string_view status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "INVALID_ARGUMENT";
    case StatusCode::kInvalidModel: return "INVALID_MODEL";
    case StatusCode::kUnsupported: return "UNSUPPORTED";
    case StatusCode::kOutOfRange: return "OUT_OF_RANGE";
    case StatusCode::kNotFound: return "NOT_FOUND";
    case StatusCode::kIoError: return "IO_ERROR";
    case StatusCode::kDeviceError: return "DEVICE_ERROR";
    case StatusCode::kInternal: return "INTERNAL";
    case StatusCode::kHazard: return "HAZARD";
    case StatusCode::kResourceExhausted: return "RESOURCE_EXHAUSTED";
  }
  return "UNKNOWN";
}

Status::Status(StatusCode code, std::string message)
    : code_(code), message_(escape_control_bytes(message, code == StatusCode::kHazard)) {
  if (code_ != StatusCode::kHazard && message_.size() > kMaxMessageBytes) {
    size_t dropped = message_.size() - kMaxMessageBytes;
    message_.resize(kMaxMessageBytes);
    message_ += fmt::format("... ({} more bytes)", dropped);
  }
}

std::string Status::to_string() const {
  if (is_ok()) return "OK";
  return std::string(status_code_name(code_)) + ": " + message_;
}

Status Status::with_context(std::string_view context) const {
  if (is_ok()) return *this;
  return Status(code_, std::string(context) + ": " + message_);
}

Status invalid_argument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
Status invalid_model(std::string m) { return {StatusCode::kInvalidModel, std::move(m)}; }
Status unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
Status out_of_range(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
Status not_found(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
Status io_error(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
Status device_error(std::string m) { return {StatusCode::kDeviceError, std::move(m)}; }
Status internal_error(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
Status resource_exhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }

namespace detail {
// `file` is the source file's name only (__FILE_NAME__): a message never shows where the
// build's sources lay.
void check_failed(const char* condition, const char* file, int line, const std::string& message) {
  std::fprintf(stderr, "strider: internal check failed at %s:%d: %s%s%s\n", file, line, condition,
               message.empty() ? "" : ": ", escape_control_bytes(message).c_str());
  std::fflush(stderr);
  std::abort();
}
}  // namespace detail

}  // namespace strider
