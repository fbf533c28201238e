#include "conf/backend_url.hpp"

#include <gtest/gtest.h>

namespace dpgate::conf {
namespace {

TEST(BackendUrl, ParsesSchemeHostAndPort) {
    EXPECT_EQ(parseBackendUrl("http://127.0.0.1:18000"), (BackendUrl{"http", "127.0.0.1", 18000}));
    EXPECT_EQ(parseBackendUrl("https://gpu-a.example.com:8443/"), (BackendUrl{"https", "gpu-a.example.com", 8443}));
    EXPECT_EQ(parseBackendUrl("http://[::1]:9000"), (BackendUrl{"http", "::1", 9000}));
}

TEST(BackendUrl, DefaultsThePortFromTheScheme) {
    EXPECT_EQ(parseBackendUrl("http://backend"), (BackendUrl{"http", "backend", 80}));
    EXPECT_EQ(parseBackendUrl("https://backend/"), (BackendUrl{"https", "backend", 443}));
    EXPECT_EQ(parseBackendUrl("https://[fe80::1]"), (BackendUrl{"https", "fe80::1", 443}));
}

TEST(BackendUrl, RejectsEverythingElse) {
    for (const char* url : {
             "",
             "127.0.0.1:18000",          // no scheme
             "ftp://h:21",               // other scheme
             "HTTP://h:1",               // schemes are matched as written
             "http://",                  // no host
             "http://:80",               // no host
             "http://h:",                // empty port
             "http://h:0",               // port 0
             "http://h:65536",           // port out of range
             "http://h:99999999999999",  // port overflow
             "http://h:-1",
             "http://h:8a",
             "http://h:1/v1",  // a path: the gateway forwards the client's path unchanged
             "http://h:1//",
             "http://h:1?x=1",
             "http://h:1#f",
             "http://user:pw@h:1",  // credentials belong in credential_env
             "http://h h:1",
             "http://[::1",  // unclosed bracket
             "http://[]:1",
             "http://[::1]x",
             "http://[::1]:",
             "http://[g::1]:1",
         }) {
        EXPECT_EQ(parseBackendUrl(url), std::nullopt) << url;
    }
}

}  // namespace
}  // namespace dpgate::conf
