#include "admission/tokens_cli.hpp"

#include <nlohmann/json.hpp>

#include <ctime>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "admission/admit.hpp"
#include "admission/template/chat_template.hpp"
#include "admission/tokenizer/token_counter.hpp"

namespace dpgate::admission {

namespace {

constexpr const char* kUsage =
    "usage: dpgate tokens --tokenizer PATH [--chat-template FILE] [--chat-template-content-format auto|string|openai]\n"
    "                     [--jsonl] [--show-prompt]\n"
    "  PATH: tokenizer.json or the directory holding it (and tokenizer_config.json)\n";

std::string dump(const nlohmann::ordered_json& value) {
    return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string errorLine(const std::string& message) { return dump(nlohmann::ordered_json{{"error", message}}); }

// The first non-space byte of a JSONL line: strings are raw text to count,
// objects are chat completions bodies.
char firstByte(const std::string& line) {
    for (char c : line) {
        if (c != ' ' && c != '\t') return c;
    }
    return 0;
}

std::string countLine(const std::string& line, TokenCounter& counter, Admitter* admitter, bool show_prompt,
                      const std::string& template_error) {
    const char first = firstByte(line);
    if (first == '"') {
        nlohmann::json value;
        try {
            value = nlohmann::json::parse(line);
        } catch (const nlohmann::json::parse_error& e) {
            return errorLine(std::string("invalid JSON: ") + e.what());
        }
        if (!value.is_string()) return errorLine("expected a JSON string or a chat completions object");
        const TokenCount count = counter.count(value.get_ref<const std::string&>());
        if (!count.ok) return errorLine(count.error);
        return dump(nlohmann::ordered_json{{"tokens", count.tokens}});
    }
    if (first != '{') return errorLine("expected a JSON string or a chat completions object");
    if (admitter == nullptr) return errorLine("no chat template: " + template_error);
    // The same scan, rendering and count as admission.
    const Admitter::ChatCount count = admitter->countChat(line);
    if (!count.ok) return errorLine(count.error);
    nlohmann::ordered_json out{{"prompt_tokens", count.prompt_tokens}, {"images", count.images}};
    if (show_prompt) out["prompt"] = admitter->prompt();
    return dump(out);
}

}  // namespace

int runTokensCli(int argc, char** argv) {
    // Lines of megabytes: unsynchronised streams read them in blocks, not per character.
    std::ios::sync_with_stdio(false);
    return runTokensCli(argc, argv, std::cin, std::cout, std::cerr);
}

int runTokensCli(int argc, char** argv, std::istream& in, std::ostream& out, std::ostream& err) {
    std::string tokenizer_path;
    ChatTemplate::LoadOptions template_options;
    bool jsonl = false;
    bool show_prompt = false;
    for (int i = 0; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--tokenizer" && i + 1 < argc) {
            tokenizer_path = argv[++i];
        } else if (arg == "--chat-template" && i + 1 < argc) {
            template_options.chat_template = argv[++i];
        } else if (arg == "--chat-template-content-format" && i + 1 < argc) {
            template_options.content_format = argv[++i];
        } else if (arg == "--jsonl") {
            jsonl = true;
        } else if (arg == "--show-prompt") {
            show_prompt = true;
        } else if (arg == "--help" || arg == "-h") {
            out << kUsage;
            return 0;
        } else if (arg == "--template") {
            err << "dpgate tokens: --template is gone: the chat template comes from the tokenizer's "
                   "tokenizer_config.json, or --chat-template FILE\n"
                << kUsage;
            return 2;
        } else {
            err << "dpgate tokens: unexpected argument " << arg << "\n" << kUsage;
            return 2;
        }
    }
    if (tokenizer_path.empty()) {
        err << "dpgate tokens: --tokenizer is required\n" << kUsage;
        return 2;
    }
    const TokenizerLoad loaded = Tokenizer::load(tokenizer_path);
    if (!loaded.tokenizer) {
        err << "dpgate tokens: " << loaded.error << "\n";
        return 1;
    }
    TokenCounter counter(loaded.tokenizer);

    if (!jsonl) {
        const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        if (in.bad()) {
            err << "dpgate tokens: cannot read stdin\n";
            return 1;
        }
        const TokenCount count = counter.count(text);
        if (!count.ok) {
            err << "dpgate tokens: " << count.error << "\n";
            return 1;
        }
        out << nlohmann::json{{"tokens", count.tokens}}.dump() << "\n";
        return 0;
    }

    // Chat bodies need the template; raw strings do not. A template named
    // on the command line must load.
    template_options.tokenizer = tokenizer_path;
    std::string template_error;
    const auto chat_template = ChatTemplate::load(template_options, template_error);
    if (!chat_template && !template_options.chat_template.empty()) {
        err << "dpgate tokens: " << template_error << "\n";
        return 1;
    }
    std::unique_ptr<Admitter> admitter;
    if (chat_template) {
        admitter = std::make_unique<Admitter>(loaded.tokenizer, chat_template,
                                              [] { return static_cast<std::int64_t>(std::time(nullptr)); });
    }
    std::string line;
    while (std::getline(in, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        out << (line.empty() ? errorLine("empty line")
                             : countLine(line, counter, admitter.get(), show_prompt, template_error))
            << "\n";
    }
    if (in.bad()) {
        err << "dpgate tokens: cannot read stdin\n";
        return 1;
    }
    out.flush();
    return 0;
}

}  // namespace dpgate::admission
