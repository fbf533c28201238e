// Fuzz admit(): the first byte picks the endpoint and a small window (so the
// exact-count path runs too); the rest is the body. The fast JSON validation
// (stage 1, jsonDepthWithin, the readers) and the plain one (JsonValidator
// over every byte first) must give the same verdict in the same words.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "admission/admit.hpp"

namespace {

dpgate::admission::Admitter makeAdmitter() {
    const char* dir = std::getenv("DPGATE_TOKENIZER_DIR");
    const std::string path = dir != nullptr ? dir : DPGATE_SOURCE_DIR "/local/tokenizer/deepseek-v3";
    auto loaded = dpgate::admission::Tokenizer::load(path);
    if (loaded.tokenizer == nullptr) std::abort();
    // The model's own chat template, as a served model would have it.
    std::string error;
    dpgate::admission::ChatTemplate::LoadOptions options;
    options.tokenizer = path;
    auto chat_template = dpgate::admission::ChatTemplate::load(options, error);
    if (chat_template == nullptr) std::abort();
    return dpgate::admission::Admitter(loaded.tokenizer, chat_template);
}

dpgate::admission::Admitter& admitter() {
    static dpgate::admission::Admitter instance = makeAdmitter();
    instance.setFastJsonValidation(true);  // whatever DPGATE_PLAIN says
    return instance;
}

dpgate::admission::Admitter& plainAdmitter() {
    static dpgate::admission::Admitter instance = makeAdmitter();
    instance.setFastJsonValidation(false);
    return instance;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    using namespace dpgate::admission;
    AdmissionLimits limits;
    limits.max_images = 3;
    limits.window_tokens = (data[0] & 0x2) != 0 ? 32768 + 64 : 1048576;
    limits.model_aliases = {"m"};
    limits.max_json_depth = 64;  // deep seeds meet it sooner
    const Endpoint endpoint = (data[0] & 0x1) != 0 ? Endpoint::completions : Endpoint::chat_completions;
    // Exact-size heap copy so ASan sees reads past the end (no padding given).
    const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
    const Verdict verdict = admitter().admit(body, endpoint, limits);
    const Verdict plain = plainAdmitter().admit(body, endpoint, limits);
    if (verdict.index() != plain.index()) std::abort();
    if (const auto* refused = std::get_if<Refused>(&verdict)) {
        const auto& other = std::get<Refused>(plain);
        if (refused->http_status != other.http_status || refused->param != other.param ||
            refused->message != other.message) {
            std::abort();
        }
    } else if (std::get<Admitted>(verdict).prompt_tokens != std::get<Admitted>(plain).prompt_tokens) {
        std::abort();
    }
    if (const auto* admitted = std::get_if<Admitted>(&verdict)) {
        const std::string forwarded = splicedBody(body, *admitted);
        if (admitted->inserted_max_tokens && forwarded.size() != body.size() + admitted->splice_text.size())
            std::abort();
    } else {
        const auto& refused = std::get<Refused>(verdict);
        if (refused.message.empty() || refused.http_status < 400) std::abort();
        (void)errorBody(refused);
    }
    return 0;
}
