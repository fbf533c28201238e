#pragma once
// Shared fixtures: the reference tokenizer (loaded once) and golden files.
#include <filesystem>
#include <memory>
#include <string>

#include "admission/template/chat_template.hpp"
#include "admission/tokenizer/tokenizer.hpp"

namespace dpgate::admission::test {

// DPGATE_TOKENIZER_DIR, else <repo>/local/tokenizer/deepseek-v3.
std::filesystem::path tokenizerDir();
std::filesystem::path goldenDir();
// Loaded once per process; fails the calling test (returns null) if absent.
std::shared_ptr<const Tokenizer> referenceTokenizer();
// The chat template of the reference tokenizer's tokenizer_config.json (DeepSeek V3's).
std::shared_ptr<const ChatTemplate> referenceChatTemplate();
// Printable form of a string for failure messages.
std::string escaped(const std::string& text, std::size_t max_bytes = 300);

}  // namespace dpgate::admission::test
