// The scanner is compiled once per simdjson kernel (request_scan_kernel.ipp)
// and picked by CPU at start: every kernel this CPU runs must read every body
// exactly as the baseline build does.
#include "admission/request_scan.hpp"
#include "admission/template/jinja/arena.hpp"
#include "admission/template/jinja/py_json.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace dpgate::admission {
namespace {

std::string dump(const jinja::Value& value) {
    std::string out;
    if (auto error = jinja::pyJsonDumps(value, jinja::JsonDumpOptions{}, out)) return "<" + *error + ">";
    return out;
}

// Everything a scan reports, as text, so that two scans compare with a diff.
std::string describe(const std::optional<ScanError>& error, const ScannedRequest& r) {
    std::ostringstream o;
    if (error) {
        o << "error " << error->param << ": " << error->message;
        return o.str();
    }
    o << "model " << r.has_model << " " << r.model << "\nmax_tokens " << r.max_tokens.present << " "
      << r.max_tokens.fits_int64 << " " << r.max_tokens.value << " " << r.max_tokens.text << "\nmax_completion_tokens "
      << r.max_completion_tokens.present << " " << r.max_completion_tokens.value << "\nstream " << r.stream << " "
      << r.include_usage << " " << r.has_stream_options << "\ncache_key " << r.has_prompt_cache_key << " "
      << r.prompt_cache_key << "\nuser " << r.user << "\nn " << r.n << "\nbrace " << r.open_brace_offset
      << "\ntool_choice " << int(r.tool_choice) << " " << r.tool_choice_name << "\n";
    for (const ChatMessage& m : r.chat.messages) {
        o << "message " << m.role << " null " << m.content_null << " string " << m.content_is_string << " images "
          << m.images << " name " << m.has_name << " " << m.name << " reasoning " << m.has_reasoning << " "
          << m.reasoning << "\n";
        for (const ChatContentPart& part : m.parts) o << "  part " << int(part.kind) << " " << part.text << "\n";
        if (m.has_tool_calls) o << "  tool_calls " << dump(m.tool_calls) << "\n";
        if (m.has_tool_call_id) o << "  tool_call_id " << dump(m.tool_call_id) << "\n";
    }
    o << "tools " << dump(r.chat.tools) << " " << r.chat.tools_json << "\nkwargs " << dump(r.chat.chat_template_kwargs)
      << "\nflags " << r.chat.add_generation_prompt << r.chat.continue_final_message << r.chat.add_special_tokens
      << "\ndocuments " << dump(r.chat.documents) << "\neffort " << dump(r.chat.reasoning_effort) << "\ntruncate "
      << r.chat.truncate_prompt_tokens.value_or(-2) << "\n";
    for (std::string_view p : r.prompt_texts) o << "prompt " << p << "\n";
    for (std::uint64_t c : r.prompt_id_counts) o << "prompt_ids " << c << "\n";
    return o.str();
}

std::string scanWith(RequestScanner& scanner, const std::string& body, Endpoint endpoint) {
    std::string padded = body + std::string(kScanPaddingBytes, '\0');
    jinja::Arena arena;
    ScannedRequest out;
    auto error = scanner.scan(std::string_view(padded.data(), body.size()), padded.size(), endpoint, arena, out);
    return describe(error, out);
}

std::vector<std::string> bodies() {
    std::vector<std::string> out = {
        R"({"model":"m","max_tokens":16,"stream":true,"stream_options":{"include_usage":true},)"
        R"("messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi \u00e9\ud83d\ude00 \"q\""}]})",
        R"({"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},)"
        R"({"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]},)"
        R"({"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function",)"
        R"("function":{"name":"f","arguments":"{\"x\": [1, 2.5, -3e2, null, true]}"}}]},)"
        R"({"role":"tool","tool_call_id":"c1","content":"42"}],"tools":[{"type":"function",)"
        R"("function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"auto","n":2,"user":"u"})",
        R"({"model":"m","prompt":["one","two \t\n"],"max_tokens":18446744073709551616})",
        R"({"model":"m","prompt":[[1,2,3],[4]]})",
        R"({"model":"m","messages":[{"role":"user","content":"unterminated)",
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"bad \xff utf-8\"}]}",
        R"({"model":"m","messages":[]} trailing)",
        R"({"model":"m","messages":[{"role":"user","content":"\ud800 lone"}]})",
        R"({"model":"m","messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"a":{"b":[1,{"c":"d"}]}}})",
        "",
        "[1,2]",
    };
    // A long body: the kernels' 64-byte blocks and their tails.
    std::string long_text;
    for (int i = 0; i < 3000; ++i) long_text += "word\\n\\\"" + std::to_string(i) + " \\u4e2d ";
    out.push_back(R"({"model":"m","messages":[{"role":"user","content":")" + long_text + R"("}]})");
    // The admission fuzzer's seed corpus.
    const std::filesystem::path corpus = std::filesystem::path(DPGATE_SOURCE_DIR) / "tests/fuzz/admission/corpus";
    if (std::filesystem::is_directory(corpus))
        for (const auto& entry : std::filesystem::directory_iterator(corpus)) {
            std::ifstream in(entry.path(), std::ios::binary);
            std::ostringstream text;
            text << in.rdbuf();
            // The fuzzer's first byte picks the endpoint; the rest is the body.
            if (!text.str().empty()) out.push_back(text.str().substr(1));
        }
    return out;
}

TEST(RequestScanKernels, TheBestKernelComesFirstAndTheBaselineIsAlwaysThere) {
    const std::vector<std::string> kernels = RequestScanner::supportedKernels();
    ASSERT_FALSE(kernels.empty());
    EXPECT_EQ(RequestScanner::bestKernel(), kernels.front());
    EXPECT_EQ(RequestScanner().kernel(), kernels.front());
    EXPECT_THROW(RequestScanner("no-such-kernel"), std::invalid_argument);
}

TEST(RequestScanKernels, EveryKernelReadsEveryBodyAsTheBaselineDoes) {
    const std::vector<std::string> kernels = RequestScanner::supportedKernels();
    if (kernels.size() < 2) GTEST_SKIP() << "this CPU runs only the " << kernels.front() << " build";
    RequestScanner baseline(kernels.back());
    const std::vector<std::string> inputs = bodies();
    ASSERT_GT(inputs.size(), 20u);
    for (std::size_t k = 0; k + 1 < kernels.size(); ++k) {
        RequestScanner scanner(kernels[k]);
        ASSERT_EQ(scanner.kernel(), kernels[k]);
        for (std::size_t i = 0; i < inputs.size(); ++i)
            for (Endpoint endpoint : {Endpoint::chat_completions, Endpoint::completions})
                EXPECT_EQ(scanWith(scanner, inputs[i], endpoint), scanWith(baseline, inputs[i], endpoint))
                    << kernels[k] << " vs " << kernels.back() << ", body " << i;
    }
}

}  // namespace
}  // namespace dpgate::admission
