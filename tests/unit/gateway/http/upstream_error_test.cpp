#include "gateway/http/upstream_error.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace dpgate::gateway {
namespace {

using nlohmann::json;

TEST(UpstreamError, OpenAiShapedBodyIsKeptByteForByte) {
    std::string body =
        R"({"error":{"message":"too long","type":"invalid_request_error","param":"messages","code":"x"}})";
    EXPECT_EQ(openAiErrorBody(400, body, "primary"), body);
}

TEST(UpstreamError, VllmShapeKeepsMessageTypeParamAndDropsANumericCode) {
    json j = json::parse(openAiErrorBody(
        500, R"({"object":"error","message":"engine dead","type":"InternalServerError","param":null,"code":500})",
        "primary"));
    EXPECT_EQ(j["error"]["message"], "engine dead");
    EXPECT_EQ(j["error"]["type"], "InternalServerError");
    EXPECT_TRUE(j["error"]["param"].is_null());
    EXPECT_TRUE(j["error"]["code"].is_null());
}

TEST(UpstreamError, FastApiDetailBecomesTheMessage) {
    json j = json::parse(openAiErrorBody(404, R"({"detail":"Not Found"})", "standby"));
    EXPECT_EQ(j["error"]["message"], "Not Found");
    EXPECT_EQ(j["error"]["type"], "upstream_error");
}

TEST(UpstreamError, TextOrJunkNamesTheBackendAndStatusWithAPrintableExcerpt) {
    json j = json::parse(openAiErrorBody(502, "<html>\r\n<h1>502 Bad Gateway</h1>\x01\xff", "primary"));
    EXPECT_EQ(j["error"]["message"], "backend 'primary' answered 502: <html>  <h1>502 Bad Gateway</h1>");
    EXPECT_EQ(j["error"]["code"], "backend_error");
    j = json::parse(openAiErrorBody(503, "", "primary"));
    EXPECT_EQ(j["error"]["message"], "backend 'primary' answered 503.");
    // JSON that is not an error object at all.
    j = json::parse(openAiErrorBody(500, "[1,2]", "primary"));
    EXPECT_EQ(j["error"]["message"], "backend 'primary' answered 500.");
}

}  // namespace
}  // namespace dpgate::gateway
