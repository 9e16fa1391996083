// Text from a model or a file, made fit for a one-line message.
//
// Names, op types and domains come from strangers: a newline in an op type would forge a
// second `strider:` line in a terminal, an ANSI escape would repaint it, and a name of a
// megabyte would bury the error. printable() escapes every control byte (\n, \t, \x1b,
// ...) and DEL and cuts the text to `max_bytes` (marking the cut with "..."). The Status
// constructor applies the same escaping to every message as a backstop, so no error line
// can span two lines whatever a caller formatted into it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace strider {

inline constexpr size_t kMaxNameInMessage = 160;

std::string printable(std::string_view text, size_t max_bytes = kMaxNameInMessage);
// Escapes control bytes and DEL; keeps '\n' when `keep_newlines` (multi-line reports).
std::string escape_control_bytes(std::string_view text, bool keep_newlines = false);

}  // namespace strider
