#include "strider/printable.h"

#include <fmt/format.h>

namespace strider {

std::string escape_control_bytes(std::string_view text, bool keep_newlines) {
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c != 0x7f) {
      out += ch;
      continue;
    }
    switch (c) {
      case '\n': out += keep_newlines ? "\n" : "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\0': out += "\\0"; break;
      default: out += fmt::format("\\x{:02x}", c); break;
    }
  }
  return out;
}

std::string printable(std::string_view text, size_t max_bytes) {
  bool cut = text.size() > max_bytes;
  std::string out = escape_control_bytes(cut ? text.substr(0, max_bytes) : text);
  if (cut) out += fmt::format("... ({} bytes)", text.size());
  return out;
}

}  // namespace strider
