// Untrusted bytes into the access-log line, into the rewrite of a backend's
// error body, and into the gateway's own error (ApiError, clipUtf8). The
// contract: no crash, and the output is always one valid JSON document (the
// log line: exactly one line); a clipped text is a prefix that ends on a
// character boundary, and valid UTF-8 survives the error body unchanged.
#include "common/api_error.hpp"
#include "gateway/http/upstream_error.hpp"
#include "gateway/path/access_log.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

using namespace dpgate::gateway;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) return 0;
    const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
    const size_t cut = input.empty() ? 0 : data[0] % (input.size() + 1);

    AccessRecord record;
    record.request_id = std::string(input.substr(0, cut));
    record.path = std::string(input.substr(cut));
    record.method = "POST";
    record.key_name = record.request_id;
    const std::string line = formatAccessLine(record, record.started);
    if (line.empty() || line.back() != '\n' || line.find('\n') != line.size() - 1) std::abort();
    nlohmann::json parsed = nlohmann::json::parse(line, nullptr, false);
    if (!parsed.is_object()) std::abort();

    const unsigned status = 400 + data[0] % 200;
    const std::string body = openAiErrorBody(status, input, "primary");
    nlohmann::json error = nlohmann::json::parse(body, nullptr, false);
    if (!error.is_object() || !error.contains("error")) std::abort();

    // The gateway's own error, quoting the bytes whole and clipped.
    const std::string_view clipped = dpgate::clipUtf8(input, cut);
    if (clipped.size() > cut || input.substr(0, clipped.size()) != clipped) std::abort();
    dpgate::ApiError own = dpgate::ApiError::badRequest(std::string(input), "bad_request", std::string(clipped));
    nlohmann::json rendered = nlohmann::json::parse(own.json(), nullptr, false);
    if (!rendered.is_object() || !rendered["error"]["message"].is_string()) std::abort();
    // Valid UTF-8 in, the same text out. nlohmann's parser checks UTF-8; an
    // input without backslashes that parses as a string body is UTF-8 with
    // no quote and no control character. NUL is excluded first: nlohmann's
    // lexer reads it as the end of the input.
    const bool valid = input.find('\0') == std::string_view::npos && input.find('\\') == std::string_view::npos &&
                       !nlohmann::json::parse("\"" + std::string(input) + "\"", nullptr, false).is_discarded();
    if (valid && rendered["error"]["message"].get<std::string>() != input) std::abort();
    return 0;
}
