// What the admin listener answers without the admin token: the status
// page's shell at /admin/ and the liveness probe's /health.
//
// The page (admin_page.html, embedded at build time) holds no data: its
// script asks for the admin token, keeps it in the tab's sessionStorage and
// sends it as `Authorization: Bearer` on every call to the admin API, which
// checks it as for any other client. A browser cannot send a bearer token on
// a navigation, so requiring the token for the shell itself would mean a
// cookie, and with it CSRF to defend against; a header-only token cannot be
// sent cross-site without a CORS preflight that this listener never grants.
//
// The page runs under a strict Content-Security-Policy: nothing but its own
// inline <style> and <script>, allowed by their SHA-256 (computed once from
// the embedded text), and fetches to its own origin.
#pragma once

#include "gateway/net/net.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace dpgate::gateway {

// The page's HTML as embedded from gateway/ops/admin_page.html.
std::string_view adminPageHtml();

// The Content-Security-Policy sent with the page.
const std::string& adminPageContentSecurityPolicy();

// GET /admin/ (the page), GET /admin (a redirect to it) and GET /health
// ({"status":"ok"}, nothing else: it proves the admin listener's thread
// answers). Anything else: nullopt, for the authenticated routes.
std::optional<http::response<http::string_body>> answerWithoutToken(const http::request<http::string_body>& request);

}  // namespace dpgate::gateway
