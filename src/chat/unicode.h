// UTF-8 code point helpers with Python str semantics: length, slicing, case, whitespace.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace chat::unicode {

// Python strings index code points, ours are UTF-8 bytes. An invalid byte decodes to
// U+DC80..U+DCFF (Python's surrogateescape) so that every byte string round-trips.
std::vector<char32_t> decode(std::string_view s);
void append_utf8(std::string& out, char32_t cp);
std::string encode(const std::vector<char32_t>& cps);
// Byte offset of each code point plus a final entry equal to s.size().
std::vector<size_t> offsets(std::string_view s);
size_t length(std::string_view s);
bool valid_utf8(std::string_view s, size_t* bad_offset);

// str.isspace(): ASCII whitespace, \x1c-\x1f, \x85, \xa0 and the Unicode space separators.
bool is_space(char32_t cp);
// Characters str.splitlines() breaks on.
bool is_line_break(char32_t cp);
// str.isprintable(), used by repr() to decide what to escape.
bool is_printable(char32_t cp);
bool is_alpha(char32_t cp);
bool is_digit(char32_t cp);
bool is_cased(char32_t cp);
// \w in Python's re: letters, digits, underscore.
bool is_word(char32_t cp);

// Case mapping covers ASCII, Latin-1, Latin Extended-A, Greek, Cyrillic and fullwidth Latin;
// other scripts are returned unchanged. upper() of U+00DF is "SS" as in Python.
std::string to_upper(std::string_view s);
std::string to_lower(std::string_view s);
char32_t lower_cp(char32_t cp);
char32_t upper_cp(char32_t cp);
// str.title(), str.capitalize(), str.swapcase().
std::string title(std::string_view s);
std::string capitalize(std::string_view s);
bool is_lower(std::string_view s);
bool is_upper(std::string_view s);

// str.strip(chars) family; chars == nullptr strips whitespace.
std::string strip(std::string_view s, const std::string* chars, bool left, bool right);
// str.split(sep, maxsplit) / rsplit; sep == nullptr splits on whitespace runs.
std::vector<std::string> split(std::string_view s, const std::string* sep, int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view s, const std::string* sep, int64_t maxsplit);
std::vector<std::string> splitlines(std::string_view s, bool keepends);
std::string replace(std::string_view s, std::string_view old, std::string_view with, int64_t count);

}  // namespace chat::unicode
