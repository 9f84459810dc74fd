// The server's pull decision (CheckServerPull): which registries a client's box may pull from,
// for a client and for an admin, and the addresses no one may pull from unless the operator
// names them. No network, no root.
#include "server/image_pulls.h"

#include <gtest/gtest.h>

#include <string>

namespace codebox::server {
namespace {

image::ImageReference Ref(const std::string& text) {
  auto ref = image::ParseImageReference(text);
  EXPECT_TRUE(ref.ok()) << text;
  return *ref;
}

PullPolicy Policy(std::vector<std::string> registries, std::vector<std::string> addresses = {}) {
  PullPolicy policy;
  for (const std::string& r : registries) {
    auto p = ParseAllowedRegistry(r);
    EXPECT_TRUE(p.ok()) << r << ": " << p.status().ToString();
    policy.registries.push_back(*p);
  }
  for (const std::string& a : addresses) {
    auto r = ParseAllowedRegistryAddress(a);
    EXPECT_TRUE(r.ok()) << a << ": " << r.status().ToString();
    policy.addresses.push_back(*r);
  }
  return policy;
}

bool Allowed(const PullPolicy& policy, const std::string& ref, bool admin = false) {
  return CheckServerPull(policy, Ref(ref), admin).ok();
}

TEST(CheckServerPullTest, NoRegistryIsAllowedByDefault) {
  const PullPolicy none;
  for (const char* ref : {"python:3.12-slim", "docker.io/library/python", "ghcr.io/org/app:1",
                          "127.0.0.1:5000/x", "localhost:5000/x", "registry.example.org/a/b"}) {
    Status st = CheckServerPull(none, Ref(ref), /*admin=*/false);
    ASSERT_FALSE(st.ok()) << ref;
    EXPECT_EQ(st.code(), StatusCode::kPermissionDenied) << ref;
    EXPECT_NE(st.message().find("not allowed"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("--allow-registry"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("codebox image pull"), std::string::npos) << st.message();
  }
}

TEST(CheckServerPullTest, TheRefusalDependsOnTheReferenceOnly) {
  // The same text whatever listens at the address: nothing is asked of the network.
  Status a = CheckServerPull({}, Ref("127.0.0.1:1/x"), false);
  Status b = CheckServerPull({}, Ref("127.0.0.1:2/x"), false);
  std::string ma = a.message(), mb = b.message();
  for (std::string* m : {&ma, &mb}) {
    for (size_t at; (at = m->find("127.0.0.1:")) != std::string::npos;) m->replace(at, 11, "ADDR");
  }
  EXPECT_EQ(ma, mb);
}

TEST(CheckServerPullTest, AllowedRegistriesByNameAndPort) {
  PullPolicy policy =
      Policy({"docker.io", "ghcr.io", "registry.example.org:5000", "*.corp.example"});
  EXPECT_TRUE(Allowed(policy, "python:3.12-slim")) << "docker.io is Docker Hub's name";
  EXPECT_TRUE(Allowed(policy, "docker.io/library/python"));
  EXPECT_TRUE(Allowed(policy, "ghcr.io/org/app:1"));
  EXPECT_TRUE(Allowed(policy, "ghcr.io:443/org/app"));
  EXPECT_FALSE(Allowed(policy, "ghcr.io:8443/org/app")) << "another port";
  EXPECT_TRUE(Allowed(policy, "registry.example.org:5000/team/base:2"));
  EXPECT_FALSE(Allowed(policy, "registry.example.org/team/base:2")) << "its default port";
  EXPECT_TRUE(Allowed(policy, "r1.corp.example/app"));
  EXPECT_FALSE(Allowed(policy, "corp.example/app")) << "a wildcard is the names below it";
  EXPECT_FALSE(Allowed(policy, "quay.io/org/app"));
  EXPECT_FALSE(Allowed(policy, "docker.io.evil.example/x"));
}

TEST(CheckServerPullTest, AnAdminMayPullFromAnyRegistry) {
  EXPECT_TRUE(Allowed({}, "quay.io/org/app", /*admin=*/true));
  EXPECT_TRUE(Allowed({}, "registry.example.org:5000/x", /*admin=*/true));
  EXPECT_TRUE(Allowed({}, "8.8.8.8:5000/x", /*admin=*/true)) << "a public address";
}

TEST(CheckServerPullTest, InternalAddressesAreRefusedForEveryoneUnlessNamed) {
  // Allowed as a registry, but at a loopback address: not without --allow-registry-address.
  PullPolicy policy =
      Policy({"127.0.0.1:5000", "localhost:5000", "10.1.2.3:5000", "169.254.169.254"});
  for (const char* ref :
       {"127.0.0.1:5000/x", "localhost:5000/x", "10.1.2.3:5000/x", "169.254.169.254/latest"}) {
    for (bool admin : {false, true}) {
      Status st = CheckServerPull(policy, Ref(ref), admin);
      ASSERT_FALSE(st.ok()) << ref;
      EXPECT_EQ(st.code(), StatusCode::kPermissionDenied);
      EXPECT_NE(st.message().find("--allow-registry-address"), std::string::npos) << st.message();
      EXPECT_NE(st.message().find("not allowed"), std::string::npos) << st.message();
    }
  }
  EXPECT_NE(CheckServerPull(policy, Ref("169.254.169.254/x"), true).message().find("link-local"),
            std::string::npos);
  EXPECT_FALSE(Allowed({}, "127.0.0.2:5000/x", /*admin=*/true));
  // Numbers a resolver would read as 127.0.0.1 are no host name.
  EXPECT_FALSE(Allowed({}, "127.1:5000/x", /*admin=*/true));
  EXPECT_FALSE(Allowed({}, "2130706433:5000/x", /*admin=*/true));
  EXPECT_FALSE(Allowed({}, "100.64.0.1:5000/x", /*admin=*/true)) << "carrier-grade NAT";

  PullPolicy named = policy;
  named.addresses = Policy({}, {"127.0.0.0/8", "10.1.0.0/16"}).addresses;
  EXPECT_TRUE(Allowed(named, "127.0.0.1:5000/x"));
  EXPECT_TRUE(Allowed(named, "localhost:5000/x")) << "127.0.0.1 is allowed";
  EXPECT_TRUE(Allowed(named, "10.1.2.3:5000/x"));
  EXPECT_FALSE(Allowed(named, "169.254.169.254/latest"));
  EXPECT_TRUE(Allowed(named, "127.0.0.9:7000/x", /*admin=*/true));
  EXPECT_FALSE(Allowed(named, "127.0.0.9:7000/x")) << "not an allowed registry";
}

TEST(CheckServerPullTest, NamesAreLeftToTheProxy) {
  // A name is judged where it is resolved, at each connection: the decision passes it.
  PullPolicy policy = Policy({"registry.internal.example"});
  EXPECT_TRUE(Allowed(policy, "registry.internal.example/x"));
}

TEST(ParseAllowedRegistryTest, NamesTheFlag) {
  EXPECT_EQ(ParseAllowedRegistry("Registry.Example.org:5000")->ToString(),
            "registry.example.org:5000");
  EXPECT_EQ(ParseAllowedRegistry("[::1]:5000")->ToString(), "[::1]:5000");
  for (const char* bad : {"", "a b", "*.org", "host:0", "host:99999", "https://x.org"}) {
    auto r = ParseAllowedRegistry(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("--allow-registry"), std::string::npos);
  }
  auto bad = ParseAllowedRegistryAddress("10.0.0.0/40");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--allow-registry-address"), std::string::npos);
}

}  // namespace
}  // namespace codebox::server
