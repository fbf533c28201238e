#include "gateway/ops/admin_page.hpp"

#include <gtest/gtest.h>

#include <regex>

using namespace dpgate::gateway;

namespace {

http::request<http::string_body> get(std::string target, http::verb verb = http::verb::get) {
    return http::request<http::string_body>{verb, target, 11};
}

size_t count(std::string_view text, std::string_view what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string_view::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

}  // namespace

TEST(AdminPage, IsSelfContainedWithOneStyleAndOneScript) {
    std::string_view html = adminPageHtml();
    EXPECT_TRUE(html.starts_with("<!doctype html>"));
    EXPECT_EQ(count(html, "<script"), 1u);
    EXPECT_EQ(count(html, "<style"), 1u);
    // Nothing fetched from elsewhere, no inline handlers or style attributes
    // (the policy would refuse them and the page would half work).
    for (std::string_view banned : {"src=", "href=", "<link", " style=", " onclick=", " onload=", "innerHTML"})
        EXPECT_EQ(html.find(banned), std::string_view::npos) << banned;
}

TEST(AdminPage, PolicyAllowsExactlyItsOwnBlocksAndThisOrigin) {
    const std::string& policy = adminPageContentSecurityPolicy();
    std::regex shape(
        "default-src 'none'; script-src 'sha256-[A-Za-z0-9+/]{43}='; style-src 'sha256-[A-Za-z0-9+/]{43}='; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
    EXPECT_TRUE(std::regex_match(policy, shape)) << policy;
    EXPECT_EQ(policy.find("unsafe"), std::string::npos);
}

TEST(AdminPage, ServedWithoutTokenWithItsHeaders) {
    auto response = answerWithoutToken(get("/admin/"));
    ASSERT_TRUE(response);
    EXPECT_EQ(response->result(), http::status::ok);
    EXPECT_EQ((*response)[http::field::content_type], "text/html; charset=utf-8");
    EXPECT_EQ((*response)["Content-Security-Policy"], adminPageContentSecurityPolicy());
    EXPECT_EQ((*response)["X-Content-Type-Options"], "nosniff");
    EXPECT_EQ((*response)[http::field::cache_control], "no-store");
    EXPECT_EQ(response->body(), adminPageHtml());
    EXPECT_TRUE(answerWithoutToken(get("/admin/?x=1")));
}

TEST(AdminPage, AdminRedirectsToTheSlash) {
    auto response = answerWithoutToken(get("/admin"));
    ASSERT_TRUE(response);
    EXPECT_EQ(response->result(), http::status::permanent_redirect);
    EXPECT_EQ((*response)[http::field::location], "/admin/");
}

TEST(AdminPage, HealthSaysOkAndNothingElse) {
    auto response = answerWithoutToken(get("/health"));
    ASSERT_TRUE(response);
    EXPECT_EQ(response->result(), http::status::ok);
    EXPECT_EQ(response->body(), "{\"status\":\"ok\"}\n");
}

TEST(AdminPage, EverythingElseIsLeftToTheTokenCheck) {
    for (std::string target : {"/admin/status", "/metrics", "/admin/flip", "/admin/x", "/", "/healthz", "/admin//"})
        EXPECT_FALSE(answerWithoutToken(get(target))) << target;
    for (http::verb verb : {http::verb::post, http::verb::put, http::verb::delete_})
        for (std::string target : {"/admin/", "/admin", "/health"})
            EXPECT_FALSE(answerWithoutToken(get(target, verb))) << target;
}

TEST(AdminPage, HeadIsAnsweredAsGet) {
    // The listener writes only the head (RFC 9110 9.3.2); its length is GET's.
    for (std::string target : {"/admin/", "/admin", "/health"}) {
        auto as_get = answerWithoutToken(get(target));
        auto as_head = answerWithoutToken(get(target, http::verb::head));
        ASSERT_TRUE(as_get && as_head) << target;
        EXPECT_EQ(as_head->result(), as_get->result()) << target;
        EXPECT_EQ(as_head->body(), as_get->body()) << target;
    }
}
