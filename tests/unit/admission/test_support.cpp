#include "test_support.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

namespace dpgate::admission::test {

std::filesystem::path tokenizerDir() {
    if (const char* dir = std::getenv("DPGATE_TOKENIZER_DIR"); dir != nullptr && *dir != '\0') return dir;
    return std::filesystem::path(DPGATE_SOURCE_DIR) / "local/tokenizer/deepseek-v3";
}

std::filesystem::path goldenDir() { return std::filesystem::path(DPGATE_SOURCE_DIR) / "tests/golden"; }

std::shared_ptr<const Tokenizer> referenceTokenizer() {
    static const TokenizerLoad loaded = Tokenizer::load(tokenizerDir());
    EXPECT_NE(loaded.tokenizer, nullptr) << loaded.error << " (run scripts/setup or set DPGATE_TOKENIZER_DIR)";
    return loaded.tokenizer;
}

std::shared_ptr<const ChatTemplate> referenceChatTemplate() {
    static const std::shared_ptr<const ChatTemplate> loaded = [] {
        std::string error;
        ChatTemplate::LoadOptions options;
        options.tokenizer = tokenizerDir();
        auto chat_template = ChatTemplate::load(options, error);
        EXPECT_NE(chat_template, nullptr) << error << " (run scripts/setup or set DPGATE_TOKENIZER_DIR)";
        return chat_template;
    }();
    return loaded;
}

std::string escaped(const std::string& text, std::size_t max_bytes) {
    std::string out;
    for (std::size_t i = 0; i < text.size() && i < max_bytes; ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c < 0x20 || c == 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", c);
            out += buf;
        } else {
            out += static_cast<char>(c);
        }
    }
    if (text.size() > max_bytes) out += "...";
    return out;
}

}  // namespace dpgate::admission::test
