#include "gateway/ops/admin_page.hpp"

#include <openssl/evp.h>
#include <openssl/sha.h>

#include <array>
#include <stdexcept>

namespace dpgate::gateway {

// Defined in the source CMake generates from admin_page.html (embed_text.cmake).
extern const std::string_view kAdminPageHtml;

std::string_view adminPageHtml() { return kAdminPageHtml; }

namespace {

// The text between `open` and `close` (`<script>`, `</script>`): what a CSP
// hash source covers. The page holds exactly one <style> and one <script>,
// written without attributes; a page that does not is a build mistake,
// caught by tests/unit/gateway/admin_page_test.cpp.
std::string_view elementText(std::string_view html, std::string_view open, std::string_view close) {
    size_t begin = html.find(open);
    size_t end = begin == std::string_view::npos ? begin : html.find(close, begin + open.size());
    if (end == std::string_view::npos || html.find(open, end) != std::string_view::npos)
        throw std::logic_error("admin_page.html must hold exactly one <style> and one <script>, without attributes");
    begin += open.size();
    return html.substr(begin, end - begin);
}

// 'sha256-<base64>' as CSP level 2 spells a hash source.
std::string hashSource(std::string_view text) {
    std::array<unsigned char, SHA256_DIGEST_LENGTH> digest{};
    SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest.data());
    std::array<unsigned char, 4 * ((SHA256_DIGEST_LENGTH + 2) / 3) + 1> base64{};
    int n = EVP_EncodeBlock(base64.data(), digest.data(), int(digest.size()));
    return "'sha256-" + std::string(reinterpret_cast<const char*>(base64.data()), size_t(n)) + "'";
}

http::response<http::string_body> withoutCaching(http::response<http::string_body> response) {
    response.set(http::field::cache_control, "no-store");
    response.set("X-Content-Type-Options", "nosniff");
    return response;
}

}  // namespace

const std::string& adminPageContentSecurityPolicy() {
    // connect-src 'self': the script talks to this listener only. form-action
    // 'none': the token form is read by the script, never submitted.
    static const std::string policy = "default-src 'none'; script-src " +
                                      hashSource(elementText(kAdminPageHtml, "<script>", "</script>")) +
                                      "; style-src " + hashSource(elementText(kAdminPageHtml, "<style>", "</style>")) +
                                      "; connect-src 'self'; base-uri 'none'; form-action 'none'; "
                                      "frame-ancestors 'none'";
    return policy;
}

std::optional<http::response<http::string_body>> answerWithoutToken(const http::request<http::string_body>& request) {
    if (request.method() != http::verb::get && request.method() != http::verb::head) return std::nullopt;
    std::string_view target = request.target();
    std::string_view path = target.substr(0, target.find('?'));
    if (path == "/health") {
        http::response<http::string_body> response{http::status::ok, 11};
        response.set(http::field::content_type, "application/json");
        response.body() = "{\"status\":\"ok\"}\n";
        return withoutCaching(std::move(response));
    }
    if (path == "/admin") {
        // 308 keeps the method; the page's relative API paths need the slash.
        http::response<http::string_body> response{http::status::permanent_redirect, 11};
        response.set(http::field::location, "/admin/");
        return withoutCaching(std::move(response));
    }
    if (path != "/admin/") return std::nullopt;
    http::response<http::string_body> response{http::status::ok, 11};
    response.set(http::field::content_type, "text/html; charset=utf-8");
    response.set("Content-Security-Policy", adminPageContentSecurityPolicy());
    response.set("X-Frame-Options", "DENY");
    response.set("Referrer-Policy", "no-referrer");
    response.set("Cross-Origin-Opener-Policy", "same-origin");
    response.body() = std::string(kAdminPageHtml);
    return withoutCaching(std::move(response));
}

}  // namespace dpgate::gateway
