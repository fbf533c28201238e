// Differential fuzzing of JsonValidator. The reference is nlohmann::json's
// SAX parser, with the two documented differences set aside:
//  - a UTF-8 byte order mark: nlohmann skips it, the validator refuses it;
//  - a number beyond double's range (1e999): nlohmann refuses it ("number
//    overflow"), the validator accepts it (RFC 8259 grammar; its readers
//    judge the value);
//  - a NUL byte: nlohmann takes it for the end of the input, the validator
//    refuses it (it is neither whitespace nor allowed raw in a string).
// Lone surrogate escapes are refused by both.
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "admission/json_validator.hpp"
#include "admission/tokenizer/utf8.hpp"

namespace {

using dpgate::admission::JsonFault;
using dpgate::admission::JsonValidation;
using dpgate::admission::JsonValidator;

// Accepts every event; records why parsing stopped.
struct Reference : nlohmann::json_sax<nlohmann::json> {
    int error_id = 0;
    bool null() override { return true; }
    bool boolean(bool) override { return true; }
    bool number_integer(number_integer_t) override { return true; }
    bool number_unsigned(number_unsigned_t) override { return true; }
    bool number_float(number_float_t, const string_t&) override { return true; }
    bool string(string_t&) override { return true; }
    bool binary(binary_t&) override { return true; }
    bool start_object(std::size_t) override { return true; }
    bool key(string_t&) override { return true; }
    bool end_object() override { return true; }
    bool start_array(std::size_t) override { return true; }
    bool end_array() override { return true; }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& ex) override {
        error_id = ex.id;
        return false;
    }
};

// Nesting of a document the validator accepted (strings skipped).
std::uint32_t depthOf(const std::string& text) {
    std::uint32_t depth = 0;
    std::uint32_t deepest = 0;
    bool in_string = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (c == '\\') {
                ++i;
            } else if (c == '"') {
                in_string = false;
            }
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > deepest) deepest = depth;
        } else if (c == ']' || c == '}') {
            --depth;
        }
    }
    return deepest;
}

void check(bool condition) {
    if (!condition) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static JsonValidator validator;
    const std::string text(reinterpret_cast<const char*>(data), size);
    JsonValidation options;
    options.max_depth = UINT32_MAX;
    options.simd = true;
    const std::optional<JsonFault> fault = validator.validate(text, options);

    // The plain string scan gives the same answer, to the byte.
    options.simd = false;
    const std::optional<JsonFault> plain = validator.validate(text, options);
    check(fault.has_value() == plain.has_value());
    if (fault) {
        check(fault->kind == plain->kind && fault->offset == plain->offset && fault->path == plain->path);
        check(fault->offset <= size);
        check(fault->path.size() <= dpgate::admission::kMaxJsonPathBytes);
        check(dpgate::admission::findInvalidUtf8(fault->path) == dpgate::admission::kValidUtf8);
    }

    Reference reference;
    const bool reference_accepts = nlohmann::json::sax_parse(text, &reference);
    const bool bom = size >= 3 && text.compare(0, 3, "\xef\xbb\xbf") == 0;
    const bool number_overflow = reference.error_id == 406;
    const bool nul = text.find('\0') != std::string::npos;
    if (!bom && !number_overflow && !nul) check(reference_accepts == !fault.has_value());
    if (bom || nul) check(fault.has_value());

    // The depth bound is exact: the deepest nesting passes, one level less does not.
    if (!fault) {
        const std::uint32_t depth = depthOf(text);
        options.simd = true;
        options.max_depth = depth;
        check(!validator.validate(text, options).has_value());
        if (depth > 0) {
            options.max_depth = depth - 1;
            const std::optional<JsonFault> too_deep = validator.validate(text, options);
            check(too_deep.has_value() && too_deep->kind == JsonFault::Kind::too_deep);
        }
    }
    return 0;
}
