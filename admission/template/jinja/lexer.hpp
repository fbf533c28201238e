#pragma once
// Template source -> tokens, as Jinja2 3.1's lexer does it with the options
// transformers compiles chat templates with (trim_blocks, lstrip_blocks, no
// trailing newline kept):
//   - newlines (\r\n, \r, \n) become \n and one trailing newline is dropped;
//   - `{%-` / `{{-` / `{#-` strip the whitespace before the tag, `-%}` /
//     `-}}` / `-#}` the whitespace after it;
//   - a block or comment tag alone on its line (only whitespace before it)
//     loses that indentation, unless it opens with `{%+`;
//   - the newline right after `%}` or `#}` is dropped, unless it closes
//     with `+%}`;
//   - `{% raw %}...{% endraw %}` is data.
// Tags end only where their brackets balance (`{{ {'a': 1} }}`).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dpgate::admission::jinja {

enum class TokenKind : std::uint8_t {
    data,
    variable_begin,
    variable_end,
    block_begin,
    block_end,
    name,
    string,   // `text` holds the decoded literal
    integer,  // `text` holds the digits (underscores removed, base prefix kept)
    floating,
    op,  // `text` is the operator: + - * / // % ** ~ [ ] ( ) { } == != < <= > >= = . : | ,
    eof,
};

struct Token {
    TokenKind kind;
    std::string text;
    int line;
};

struct LexError {
    std::string message;
    int line;
};

// Tokens of `source`, or why it cannot be lexed.
std::optional<LexError> lexTemplate(std::string_view source, std::vector<Token>& tokens);

}  // namespace dpgate::admission::jinja
