/** \file text.h
 * Strings that users hand to metile and that may reach generated source (source-location file
 * names, kernel and parameter names, constexpr records, attribute strings). They are checked once
 * where they enter (check_text) and escaped again wherever they are written into source
 * (printable_ascii), so neither a missed check nor a new emitter can turn one into code.
 */
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace metile {

/** The longest string check_text accepts by default (file paths are the longest expected). */
inline constexpr size_t kMaxTextBytes = 4096;
/** The longest kernel, parameter or constexpr name. */
inline constexpr size_t kMaxNameBytes = 256;

/** Empty when `s` is well-formed UTF-8 with no control characters (C0, DEL, C1) and at most
 * `max_bytes` long; otherwise why not ("contains a control character (\r) at byte 4"). */
std::string text_problem(std::string_view s, size_t max_bytes = kMaxTextBytes);

/** Throws INVALID_ARGUMENT "[subsystem] WHAT "ESCAPED" PROBLEM" when text_problem(s) is not empty;
 * `what` names the string ("source file name", "parameter name"). */
void check_text(std::string_view s, std::string_view what, const char* subsystem,
                size_t max_bytes = kMaxTextBytes);

/** `s` as printable ASCII that is inert inside a C, C++, MSL or CUDA comment and in an error
 * message: bytes outside 0x20..0x7e and backslashes become \xNN, and the sequences that could end
 * or change a comment ("* /", "/ *", "??") are broken with \x escapes. Never contains a line break
 * or ends with a backslash. */
std::string printable_ascii(std::string_view s);

/** The non-empty items of a `sep`-separated list: "a,,b," gives {"a", "b"} (views into `s`). */
std::vector<std::string_view> split_list(std::string_view s, char sep = ',');

}  // namespace metile
