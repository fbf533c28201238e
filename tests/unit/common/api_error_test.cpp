#include "common/api_error.hpp"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

using dpgate::ApiError;
using dpgate::clipUtf8;

TEST(ApiError, RendersOpenAIsShapeWithNullsForEmptyFields) {
    EXPECT_EQ(ApiError::invalidParam("max_tokens", "m").json(),
              R"({"error":{"code":null,"message":"m","param":"max_tokens","type":"invalid_request_error"}})");
    const ApiError limited = ApiError::rateLimited("slow down");
    EXPECT_EQ(limited.http_status, 429u);
    EXPECT_EQ(limited.body(),
              R"({"error":{"code":"rate_limit_exceeded","message":"slow down","param":null,"type":"rate_limit_error"}})"
              "\n");
}

TEST(ApiError, NamedConstructorsSetStatusTypeAndCode) {
    struct Case {
        ApiError error;
        unsigned status;
        const char* type;
        const char* code;
    };
    const Case cases[] = {
        {ApiError::badRequest("x"), 400, "invalid_request_error", "bad_request"},
        {ApiError::unauthorized("x"), 401, "invalid_request_error", "invalid_api_key"},
        {ApiError::forbidden("x", "metrics_not_allowed"), 403, "permission_error", "metrics_not_allowed"},
        {ApiError::notFound("x"), 404, "invalid_request_error", "not_found"},
        {ApiError::methodNotAllowed("x"), 405, "invalid_request_error", "method_not_allowed"},
        {ApiError::conflict("x", "flip_refused"), 409, "invalid_request_error", "flip_refused"},
        {ApiError::payloadTooLarge("x"), 413, "invalid_request_error", "request_too_large"},
        {ApiError::expectationFailed("x"), 417, "invalid_request_error", "bad_request"},
        {ApiError::headerTooLarge("x"), 431, "invalid_request_error", "request_header_too_large"},
        {ApiError::internal("x"), 500, "server_error", "internal_error"},
        {ApiError::badGateway("x", "backend_error"), 502, "upstream_error", "backend_error"},
        {ApiError::unavailable("x", "backend_unavailable"), 503, "upstream_error", "backend_unavailable"},
        {ApiError::gatewayTimeout("x", "backend_timeout"), 504, "upstream_error", "backend_timeout"},
    };
    for (const Case& c : cases) {
        EXPECT_EQ(c.error.http_status, c.status) << c.code;
        EXPECT_EQ(c.error.type, c.type) << c.code;
        EXPECT_EQ(c.error.code, c.code);
    }
}

TEST(ApiError, BytesThatAreNotUtf8BecomeReplacementCharactersAndTheBodyStaysJson) {
    // A lone continuation byte, a truncated sequence, an overlong, a surrogate,
    // past U+10FFFF: each is replaced; the valid text around them is kept.
    const std::string message = std::string("a\x80") + "b\xC3" + "c\xC0\xAF" + "d\xED\xA0\x80" + "e\xF4\x90\x80\x80" +
                                "f\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";
    const ApiError error = ApiError::notFound(message);
    const nlohmann::json parsed = nlohmann::json::parse(error.json());  // strict: throws on invalid UTF-8
    const std::string decoded = parsed["error"]["message"].get<std::string>();
    const std::string r = "\xEF\xBF\xBD";
    EXPECT_EQ(decoded, "a" + r + "b" + r + "c" + r + r + "d" + r + r + r + "e" + r + r + r + r +
                           "f\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
}

TEST(ApiError, EscapesLikeJsonAndAgreesWithNlohmannOnValidText) {
    const std::string text =
        std::string("quote \" backslash \\ tab \t nl \n cr \r bell \x07 nul ") + '\0' + " del \x7f / \xC3\xA9";
    std::string ours;
    dpgate::appendJsonString(ours, text);
    EXPECT_EQ(ours, nlohmann::json(text).dump());
}

TEST(ClipUtf8, CutsOnlyOnCharacterBoundaries) {
    const std::string model = std::string(199, 'm') + "\xC3\xA9";  // 199 ASCII + e-acute
    EXPECT_EQ(clipUtf8(model, 200), std::string(199, 'm'));
    EXPECT_EQ(clipUtf8(model, 201), model);
    EXPECT_EQ(clipUtf8("\xE2\x82\xAC\xE2\x82\xAC", 4), "\xE2\x82\xAC");
    EXPECT_EQ(clipUtf8("\xE2\x82\xAC\xE2\x82\xAC", 5), "\xE2\x82\xAC");
    EXPECT_EQ(clipUtf8("\xF0\x9F\x98\x80", 3), "");
    EXPECT_EQ(clipUtf8("abc", 0), "");
    EXPECT_EQ(clipUtf8("abc", 2), "ab");
}
