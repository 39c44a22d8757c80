// --endpoint parsing: origin and API prefix, /v1 added once, bad URLs refused in one line.
#include <gtest/gtest.h>

#include "load/runner.h"

namespace {

TEST(ParseEndpoint, OriginAndPrefix) {
  struct Case {
    const char* url;
    const char* origin;
    const char* prefix;
  };
  for (const Case& c : {
           Case{"http://127.0.0.1:8080", "http://127.0.0.1:8080", "/v1"},
           Case{"http://127.0.0.1:8080/", "http://127.0.0.1:8080", "/v1"},
           Case{"http://localhost:1/v1", "http://localhost:1", "/v1"},
           Case{"http://localhost:1/v1/", "http://localhost:1", "/v1"},
           Case{"https://api.example.com", "https://api.example.com", "/v1"},
           Case{"https://api.example.com/openai", "https://api.example.com", "/openai/v1"},
           Case{"https://api.example.com/openai/v1", "https://api.example.com", "/openai/v1"},
           Case{"http://h:9/xv1", "http://h:9", "/xv1/v1"},  // ends in "v1" but not in "/v1"
           Case{"http://[::1]:8080", "http://[::1]:8080", "/v1"},
       }) {
    auto e = load::parse_endpoint(c.url);
    ASSERT_TRUE(e.ok()) << c.url << ": " << e.error().message();
    EXPECT_EQ(e->origin, c.origin) << c.url;
    EXPECT_EQ(e->api_prefix, c.prefix) << c.url;
  }
}

TEST(ParseEndpoint, BadUrlsAreRefused) {
  for (const char* url : {"", "127.0.0.1:8080", "localhost", "ftp://h:21", "http://", "http:///v1",
                          "http://h:1/v1?key=x", "http://h:1/#top", "http://h :1"}) {
    auto e = load::parse_endpoint(url);
    ASSERT_FALSE(e.ok()) << "accepted " << url;
    EXPECT_NE(e.error().message().find("--endpoint"), std::string::npos) << e.error().message();
    EXPECT_NE(e.error().message().find("http://127.0.0.1:8080"), std::string::npos) << "an example";
  }
}

}  // namespace
