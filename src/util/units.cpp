// Human-readable sizes and parsing of size arguments.
#include "util/units.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

namespace util {

std::string format_bytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double v = static_cast<double>(bytes);
  int unit = 0;
  while (v >= 1024.0 && unit < 5) {
    v /= 1024.0;
    ++unit;
  }
  return fmt::format("{:.2f} {}", v, kUnits[unit]);
}

Result<uint64_t> parse_bytes(std::string_view text) {
  std::string s(text);
  size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  if (i == 0) return errorf("cannot read size '{}' — use a number with an optional unit, e.g. 8G or 512M", text);
  double number = std::strtod(s.substr(0, i).c_str(), nullptr);
  std::string unit;
  for (size_t j = i; j < s.size(); ++j) {
    if (!std::isspace(static_cast<unsigned char>(s[j]))) unit += static_cast<char>(std::toupper(static_cast<unsigned char>(s[j])));
  }
  double scale = 1;
  if (unit.empty() || unit == "B") scale = 1;
  else if (unit == "K" || unit == "KB" || unit == "KIB") scale = 1024.0;
  else if (unit == "M" || unit == "MB" || unit == "MIB") scale = 1024.0 * 1024;
  else if (unit == "G" || unit == "GB" || unit == "GIB") scale = 1024.0 * 1024 * 1024;
  else if (unit == "T" || unit == "TB" || unit == "TIB") scale = 1024.0 * 1024 * 1024 * 1024;
  else return errorf("unknown size unit '{}' in '{}' — use K, M, G or T", unit, text);
  double bytes = number * scale;
  if (!std::isfinite(bytes) || bytes < 0 || bytes > 1.8e19) return errorf("size '{}' is out of range", text);
  return static_cast<uint64_t>(std::llround(bytes));
}

}  // namespace util
