#pragma once
// `dpgate tokens --tokenizer PATH [--template deepseek-v3] [--jsonl]`
//
// Reads raw text on stdin and prints {"tokens":N}. With --jsonl, each stdin
// line is a JSON value: a string -> {"tokens":N}; an object (a chat
// completions body) -> {"prompt_tokens":N,"images":K}; one output line per
// input line, a bad line gets {"error":"..."} and the rest continue.
// Fatal errors (usage, tokenizer load, invalid UTF-8 in raw mode) print a
// message on stderr and return non-zero.
#include <iosfwd>

namespace dpgate::admission {

// argv starts after "tokens".
int runTokensCli(int argc, char** argv);
// Same, with explicit streams (tests).
int runTokensCli(int argc, char** argv, std::istream& in, std::ostream& out, std::ostream& err);

}  // namespace dpgate::admission
