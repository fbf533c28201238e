#pragma once
// `dpgate tokens --tokenizer PATH [--chat-template FILE] [--jsonl] [--show-prompt]`
//
// Reads raw text on stdin and prints {"tokens":N}. With --jsonl, each stdin
// line is a JSON value: a string -> {"tokens":N}; an object (a chat
// completions body, rendered with the model's chat template as vLLM renders
// it) -> {"prompt_tokens":N,"images":K[,"prompt":"..."]}; one output line per
// input line, a bad line (or one the template refuses) gets
// {"error":"..."} and the rest continue.
// Fatal errors (usage, tokenizer load, invalid UTF-8 in raw mode) print a
// message on stderr and return non-zero.
#include <iosfwd>

namespace dpgate::admission {

// argv starts after "tokens".
int runTokensCli(int argc, char** argv);
// Same, with explicit streams (tests).
int runTokensCli(int argc, char** argv, std::istream& in, std::ostream& out, std::ostream& err);

}  // namespace dpgate::admission
