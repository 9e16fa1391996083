#include "base/memory_budget.h"

#include <fmt/format.h>
#include <unistd.h>

#include <charconv>
#include <cmath>
#include <string>

namespace strider {

Status MemoryBudget::reserve(int64_t bytes, std::string_view what) {
  STRIDER_RETURN_IF_ERROR(reserve_here(bytes, what));
  if (!parent_) return Status::ok();
  Status in_parent = parent_->reserve(bytes, what);
  if (!in_parent.is_ok()) used_.fetch_sub(bytes);
  return in_parent;
}

Status MemoryBudget::reserve_here(int64_t bytes, std::string_view what) {
  if (bytes < 0) return internal_error(fmt::format("{}: reserving {} bytes", what, bytes));
  int64_t used = used_.load();
  do {
    if (bytes > limit_ - used)
      return resource_exhausted(fmt::format("{} needs {} ({} bytes); the memory budget is {} and {} of it is in use "
                                            "(--max-memory / SessionOptions::max_memory_bytes)",
                                            what, format_bytes(bytes), bytes, format_bytes(limit_), format_bytes(used)));
  } while (!used_.compare_exchange_weak(used, used + bytes));
  return Status::ok();
}

int64_t physical_memory_bytes() {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? int64_t(pages) * int64_t(page) : 0;
}

int64_t default_host_memory_budget() {
  int64_t physical = physical_memory_bytes();
  // Unknown physical memory: 16 GiB, a size every machine strider runs on can be asked for.
  return physical > 0 ? physical / 5 * 4 : int64_t(16) << 30;
}

std::string format_bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = double(bytes);
  int unit = 0;
  while (std::fabs(value) >= 1024 && unit < 6) value /= 1024, ++unit;
  return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", value, units[unit]);
}

std::optional<int64_t> parse_byte_size(std::string_view text) {
  double number = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (ec != std::errc() || end == text.data() || !std::isfinite(number) || number < 0) return std::nullopt;
  std::string unit(end, text.data() + text.size());
  if (unit.size() >= 3 && unit.substr(unit.size() - 2) == "iB") unit.resize(unit.size() - 2);
  else if (unit.size() == 2 && unit.back() == 'B') unit.resize(1);
  double scale = 1;
  if (unit == "K" || unit == "k") scale = 1024.0;
  else if (unit == "M") scale = 1024.0 * 1024;
  else if (unit == "G") scale = 1024.0 * 1024 * 1024;
  else if (unit == "T") scale = 1024.0 * 1024 * 1024 * 1024;
  else if (!unit.empty() && unit != "B") return std::nullopt;
  double bytes = number * scale;
  if (bytes > double(int64_t(1) << 62)) return std::nullopt;
  return int64_t(bytes);
}

}  // namespace strider
