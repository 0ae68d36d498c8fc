#include "support/text.h"

#include <cstdint>

#include "support/error.h"

namespace metile {

namespace {

std::string hex_byte(unsigned char c) {
  static const char* digits = "0123456789abcdef";
  return std::string("\\x") + digits[c >> 4] + digits[c & 15];
}

// Length of the UTF-8 sequence starting at s[i] and its code point, or 0 when it is malformed
// (bad lead byte, truncated, bad continuation, overlong, surrogate, or above U+10FFFF).
size_t utf8_sequence(std::string_view s, size_t i, uint32_t& cp) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  size_t n;
  uint32_t min;
  if (c < 0x80) {
    cp = c;
    return 1;
  } else if ((c & 0xe0) == 0xc0) {
    n = 2, min = 0x80, cp = c & 0x1f;
  } else if ((c & 0xf0) == 0xe0) {
    n = 3, min = 0x800, cp = c & 0x0f;
  } else if ((c & 0xf8) == 0xf0) {
    n = 4, min = 0x10000, cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    unsigned char d = static_cast<unsigned char>(s[i + k]);
    if ((d & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (d & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

}  // namespace

std::string text_problem(std::string_view s, size_t max_bytes) {
  if (s.size() > max_bytes) return cat("is ", s.size(), " bytes long (at most ", max_bytes, ")");
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    size_t n = utf8_sequence(s, i, cp);
    if (n == 0) return cat("is not valid UTF-8 (byte ", hex_byte(static_cast<unsigned char>(s[i])), " at ", i, ")");
    if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xa0))
      return cat("contains a control character (U+", cp < 0x10 ? "000" : "00", std::hex, cp,
                 std::dec, ") at byte ", i);
    i += n;
  }
  return {};
}

void check_text(std::string_view s, std::string_view what, const char* subsystem, size_t max_bytes) {
  std::string why = text_problem(s, max_bytes);
  if (why.empty()) return;
  // A long string is shown by its head only; the message must stay readable.
  std::string shown = printable_ascii(s.substr(0, 80)) + (s.size() > 80 ? "..." : "");
  fail(METILE_ERROR_INVALID_ARGUMENT, subsystem, what, " \"", shown, "\" ", why);
}

std::string printable_ascii(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    char prev = out.empty() ? '\0' : out.back();
    bool breaks = (c == '/' && prev == '*') || (c == '*' && prev == '/') || (c == '?' && prev == '?');
    if (c < 0x20 || c > 0x7e || c == '\\' || breaks) out += hex_byte(c);
    else out += static_cast<char>(c);
  }
  return out;
}

std::vector<std::string_view> split_list(std::string_view s, char sep) {
  std::vector<std::string_view> items;
  while (!s.empty()) {
    size_t end = s.find(sep);
    if (end != 0) items.push_back(s.substr(0, end));
    if (end == std::string_view::npos) break;
    s.remove_prefix(end + 1);
  }
  return items;
}

}  // namespace metile
