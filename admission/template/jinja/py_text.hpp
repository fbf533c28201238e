#pragma once
// Python's `str` methods over UTF-8, for the chat-template engine. Jinja2
// on the backend runs templates over Python strings, so a filter or method
// call here must give what CPython 3.11 gives, code point for code point:
// indices, lengths and widths count code points, never bytes, and the
// character classes and case mappings are CPython's own, generated from
// /usr/bin/python3 into py_text_tables.cpp (the Unicode version is in that
// file's header and in pyUnicodeVersion()).
//
// Every input is valid UTF-8; every output is valid UTF-8. A string_view
// returned points into the argument it came from. Where Python raises
// (an empty separator, a slice step of 0, a fill that is not one
// character), the caller checks and raises first; the preconditions below
// say which. Nothing here throws but the allocator (std::bad_alloc, and
// std::length_error for an output past max_size()).
//
// Time is linear in input plus output whatever the bytes (a search needle
// under 32 bytes costs up to its length per byte), so request text cannot
// make a template quadratic through these calls. What bounds the output
// (pyCenter's width, pyReplace on a long text) is the caller's to limit.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dpgate::admission::jinja {

// The Unicode version of the character tables, as unicodedata.unidata_version.
std::string_view pyUnicodeVersion();

// --- Case: full mappings ('ß'.upper() == 'SS', 'İ'.lower() == 'i̇') -------

std::string pyUpper(std::string_view text);
// U+03A3 becomes final sigma when a cased character precedes it and none
// follows, skipping case-ignorable characters (CPython's rule).
std::string pyLower(std::string_view text);
// Titlecase after an uncased character, lowercase after a cased one.
std::string pyTitle(std::string_view text);
// Titlecase (not uppercase, since Python 3.8) for the first code point,
// lowercase for the rest: 'ǆa' -> 'ǅa'.
std::string pyCapitalize(std::string_view text);
// Uppercase characters lowered, lowercase ones uppered, others kept.
std::string pySwapcase(std::string_view text);

// --- Character classes ---------------------------------------------------

bool pyIsSpace(char32_t c);      // str.isspace of one character
bool pyIsPrintable(char32_t c);  // str.isprintable of one character

// Whole strings, as the str methods: false for "" except pyIsPrintableStr.
bool pyIsSpaceStr(std::string_view text);
bool pyIsPrintableStr(std::string_view text);
bool pyIsAlpha(std::string_view text);
bool pyIsDigit(std::string_view text);
bool pyIsDecimal(std::string_view text);
bool pyIsNumeric(std::string_view text);
bool pyIsAlnum(std::string_view text);
// Cased characters all upper (lower) and at least one of them.
bool pyIsUpper(std::string_view text);
bool pyIsLower(std::string_view text);
// Uppercase/titlecase only after uncased characters, lowercase only after
// cased ones, and at least one cased character.
bool pyIsTitle(std::string_view text);

// --- Strip ---------------------------------------------------------------

// Whitespace as pyIsSpace.
std::string_view pyStrip(std::string_view text);
std::string_view pyLstrip(std::string_view text);
std::string_view pyRstrip(std::string_view text);
// The code points of `chars` form the set; an empty `chars` strips nothing.
std::string_view pyStrip(std::string_view text, std::string_view chars);
std::string_view pyLstrip(std::string_view text, std::string_view chars);
std::string_view pyRstrip(std::string_view text, std::string_view chars);

// --- Split (maxsplit < 0: no limit) ----------------------------------------

// str.split() / str.split(None, maxsplit): runs of whitespace separate, no
// empty items. Takes an integer where the next overload takes a separator.
std::vector<std::string_view> pySplit(std::string_view text, std::int64_t maxsplit = -1);
// Precondition: `sep` is not empty (Python raises ValueError).
std::vector<std::string_view> pySplit(std::string_view text, std::string_view sep, std::int64_t maxsplit = -1);
std::vector<std::string_view> pyRsplit(std::string_view text, std::int64_t maxsplit = -1);
std::vector<std::string_view> pyRsplit(std::string_view text, std::string_view sep, std::int64_t maxsplit = -1);
// Boundaries: \n \r \r\n \v \f \x1c \x1d \x1e \x85 \u2028 \u2029.
std::vector<std::string_view> pySplitlines(std::string_view text, bool keepends = false);

// --- Code points ---------------------------------------------------------

std::size_t codePointCount(std::string_view text);
// text[start:stop:step]; an absent bound is Python's None. Precondition:
// step != 0 (Python raises ValueError); an empty string is returned for it.
std::string pySlice(std::string_view text, std::optional<std::int64_t> start, std::optional<std::int64_t> stop,
                    std::int64_t step = 1);
// text[index], negative from the end; nullopt where Python raises IndexError.
std::optional<std::string_view> pyCharAt(std::string_view text, std::int64_t index);

// --- Search (start and end as in text[start:end]; absent is None) ----------

// Code-point index of the first (last) occurrence, or -1.
// `sub in text`: linear in the text, whatever the two hold.
bool pyContains(std::string_view text, std::string_view sub);
std::int64_t pyFind(std::string_view text, std::string_view sub, std::optional<std::int64_t> start = {},
                    std::optional<std::int64_t> end = {});
std::int64_t pyRfind(std::string_view text, std::string_view sub, std::optional<std::int64_t> start = {},
                     std::optional<std::int64_t> end = {});
// Non-overlapping occurrences; an empty `sub` counts the gaps (length + 1).
std::int64_t pyCount(std::string_view text, std::string_view sub, std::optional<std::int64_t> start = {},
                     std::optional<std::int64_t> end = {});
bool pyStartswith(std::string_view text, std::string_view prefix, std::optional<std::int64_t> start = {},
                  std::optional<std::int64_t> end = {});
bool pyEndswith(std::string_view text, std::string_view suffix, std::optional<std::int64_t> start = {},
                std::optional<std::int64_t> end = {});
// At most `count` replacements, left to right (count < 0: all). An empty
// `old` inserts `replacement` before every code point and at the end.
std::string pyReplace(std::string_view text, std::string_view old, std::string_view replacement,
                      std::int64_t count = -1);
// The size of pyReplace's result, without building it (saturates at SIZE_MAX).
std::size_t pyReplacedSize(std::string_view text, std::string_view old, std::string_view replacement,
                           std::int64_t count = -1);

// --- Padding (width in code points; narrower or equal: text unchanged) -----

// Precondition: `fill` is exactly one code point (Python raises TypeError).
std::string pyCenter(std::string_view text, std::int64_t width, std::string_view fill = " ");
std::string pyLjust(std::string_view text, std::int64_t width, std::string_view fill = " ");
std::string pyRjust(std::string_view text, std::int64_t width, std::string_view fill = " ");
// Zeros on the left, after a leading '+' or '-'.
std::string pyZfill(std::string_view text, std::int64_t width);

// --- Repr ----------------------------------------------------------------

// repr(str): single quotes unless the text has ' and no "; \\ \n \r \t and
// the quote escaped; other non-printables as \xNN, \uNNNN or \UNNNNNNNN.
std::string pyRepr(std::string_view text);

}  // namespace dpgate::admission::jinja
