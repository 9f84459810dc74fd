#include "net/egress_policy.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <string>

namespace codebox::net {
namespace {

in_addr V4(const char* text) {
  in_addr a{};
  EXPECT_EQ(inet_pton(AF_INET, text, &a), 1) << text;
  return a;
}

in6_addr V6(const char* text) {
  in6_addr a{};
  EXPECT_EQ(inet_pton(AF_INET6, text, &a), 1) << text;
  return a;
}

std::string ClassOf(const char* text) {
  auto c = std::string(text).find(':') == std::string::npos ? ForbiddenAddressClass(V4(text))
                                                            : ForbiddenAddressClass(V6(text));
  return c.value_or("public");
}

TEST(NetworkModeTest, ParsesTheThreeNamesOnly) {
  EXPECT_EQ(*ParseNetworkMode("none"), NetworkMode::kNone);
  EXPECT_EQ(*ParseNetworkMode("allow"), NetworkMode::kAllow);
  EXPECT_EQ(*ParseNetworkMode("open"), NetworkMode::kOpen);
  auto bad = ParseNetworkMode("Open");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("none"), std::string::npos);
}

TEST(NormalizeHostTest, LowersAndChecksNames) {
  EXPECT_EQ(*NormalizeHost("PyPI.org."), "pypi.org");
  EXPECT_EQ(*NormalizeHost("files.pythonhosted.org"), "files.pythonhosted.org");
  EXPECT_EQ(*NormalizeHost("xn--bcher-kva.example"), "xn--bcher-kva.example");
  EXPECT_EQ(*NormalizeHost("[FD00::1]"), "fd00::1");
  EXPECT_EQ(*NormalizeHost("10.0.0.5"), "10.0.0.5");
  for (const char* bad : {"", ".", "a..b", "-a.org", "a-.org", "a b.org", "a/b", "exa%mple.org",
                          "a\nb.org", "[10.0.0.1]", "[fd00::1", "bücher.example"}) {
    EXPECT_FALSE(NormalizeHost(bad).ok()) << bad;
  }
  EXPECT_FALSE(NormalizeHost(std::string(64, 'a') + ".org").ok()) << "a label over 63";
  EXPECT_FALSE(NormalizeHost(std::string(250, 'a').insert(60, ".").insert(120, ".")).ok());
}

TEST(NormalizeHostTest, RefusesNumbersAResolverWouldReadAsAddresses) {
  // getaddrinfo reads each of these as 127.0.0.1; none is a name.
  for (const char* sneaky :
       {"2130706433", "127.1", "0x7f.1", "0x7f000001", "017700000001", "evil.127"}) {
    auto r = NormalizeHost(sneaky);
    EXPECT_FALSE(r.ok()) << sneaky;
  }
  EXPECT_TRUE(NormalizeHost("1password.com").ok()) << "a numeric first label is fine";
}

TEST(HostPatternTest, ParsesEachForm) {
  auto exact = ParseHostPattern("Example.org");
  ASSERT_TRUE(exact.ok());
  EXPECT_EQ(exact->host, "example.org");
  EXPECT_FALSE(exact->wildcard);
  EXPECT_FALSE(exact->port);
  auto wild = ParseHostPattern("*.example.org:8443");
  ASSERT_TRUE(wild.ok());
  EXPECT_TRUE(wild->wildcard);
  EXPECT_EQ(*wild->port, 8443);
  EXPECT_EQ(wild->ToString(), "*.example.org:8443");
  auto v6 = ParseHostPattern("[fd00::1]:80");
  ASSERT_TRUE(v6.ok());
  EXPECT_TRUE(v6->ip_literal);
  EXPECT_EQ(v6->ToString(), "[fd00::1]:80");
  EXPECT_TRUE(ParseHostPattern("fd00::1").ok()) << "bare IPv6 without a port";
  for (const char* bad : {"", "*.org", "*.10.0.0.1", "example.org:0", "example.org:65536",
                          "example.org:http", "[fd00::1]80", "*", "*.", "http://example.org"}) {
    auto r = ParseHostPattern(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find(std::string(bad)), std::string::npos);
    }
  }
}

TEST(HostPatternTest, PortsDefaultTo80And443) {
  auto p = *ParseHostPattern("example.org");
  EXPECT_TRUE(p.MatchesName("example.org", 80));
  EXPECT_TRUE(p.MatchesName("example.org", 443));
  EXPECT_FALSE(p.MatchesName("example.org", 22));
  auto q = *ParseHostPattern("example.org:8080");
  EXPECT_TRUE(q.MatchesName("example.org", 8080));
  EXPECT_FALSE(q.MatchesName("example.org", 443));
}

TEST(HostPatternTest, AWildcardMatchesNamesBelowItOnly) {
  auto p = *ParseHostPattern("*.example.org");
  EXPECT_TRUE(p.MatchesName("a.example.org", 443));
  EXPECT_TRUE(p.MatchesName("a.b.example.org", 443));
  EXPECT_FALSE(p.MatchesName("example.org", 443));
  EXPECT_FALSE(p.MatchesName("badexample.org", 443));
  EXPECT_FALSE(p.MatchesName("example.org.evil.com", 443));
}

TEST(AddressClassTest, ForbiddenIPv4Ranges) {
  EXPECT_EQ(ClassOf("127.0.0.1"), "loopback");
  EXPECT_EQ(ClassOf("127.255.1.2"), "loopback");
  EXPECT_EQ(ClassOf("10.1.2.3"), "private");
  EXPECT_EQ(ClassOf("172.16.0.1"), "private");
  EXPECT_EQ(ClassOf("172.31.255.255"), "private");
  EXPECT_EQ(ClassOf("172.32.0.1"), "public");
  EXPECT_EQ(ClassOf("192.168.1.1"), "private");
  EXPECT_EQ(ClassOf("169.254.169.254"), "link-local");
  EXPECT_EQ(ClassOf("100.64.0.1"), "carrier-grade NAT");
  EXPECT_EQ(ClassOf("0.0.0.0"), "unspecified");
  EXPECT_EQ(ClassOf("224.0.0.251"), "multicast");
  EXPECT_EQ(ClassOf("255.255.255.255"), "broadcast");
  EXPECT_EQ(ClassOf("240.0.0.1"), "reserved");
  EXPECT_EQ(ClassOf("198.18.0.1"), "benchmarking");
  EXPECT_EQ(ClassOf("192.0.2.1"), "documentation");
  EXPECT_EQ(ClassOf("8.8.8.8"), "public");
  EXPECT_EQ(ClassOf("151.101.0.223"), "public");
}

TEST(AddressClassTest, IPv6AndIPv4InsideIt) {
  EXPECT_EQ(ClassOf("::1"), "loopback");
  EXPECT_EQ(ClassOf("::"), "unspecified");
  EXPECT_EQ(ClassOf("::ffff:127.0.0.1"), "loopback") << "IPv4-mapped";
  EXPECT_EQ(ClassOf("::ffff:169.254.169.254"), "link-local");
  EXPECT_EQ(ClassOf("64:ff9b::10.0.0.1"), "private") << "NAT64";
  EXPECT_EQ(ClassOf("2002:7f00:1::"), "loopback") << "6to4 of 127.0.0.1";
  EXPECT_EQ(ClassOf("::127.0.0.1"), "reserved") << "IPv4-compatible";
  EXPECT_EQ(ClassOf("fd12:3456::1"), "unique local");
  EXPECT_EQ(ClassOf("fe80::1"), "link-local");
  EXPECT_EQ(ClassOf("ff02::1"), "multicast");
  EXPECT_EQ(ClassOf("2001:db8::1"), "documentation");
  EXPECT_EQ(ClassOf("2001:0:4136:e378::1"), "reserved") << "Teredo";
  EXPECT_EQ(ClassOf("2a00:1450:4001::1"), "public");
  EXPECT_EQ(ClassOf("::ffff:8.8.8.8"), "public");
}

TEST(EgressPolicyTest, NoneRefusesEverything) {
  EgressPolicy none = EgressPolicy::None();
  EXPECT_FALSE(none.CheckName("example.org", 443).allowed);
  EXPECT_FALSE(none.CheckAddress(V4("8.8.8.8"), 443).allowed);
  EXPECT_NE(none.CheckName("example.org", 443).reason.find("none"), std::string::npos);
}

TEST(EgressPolicyTest, AllowChecksNamesThenAddresses) {
  auto policy = EgressPolicy::Allow({"pypi.org", "*.pythonhosted.org", "10.0.0.5:8080"});
  ASSERT_TRUE(policy.ok()) << policy.status().ToString();
  EXPECT_TRUE(policy->CheckName("PYPI.org", 443).allowed);
  EXPECT_TRUE(policy->CheckName("files.pythonhosted.org", 443).allowed);
  Decision off = policy->CheckName("evil.com", 443);
  EXPECT_FALSE(off.allowed);
  EXPECT_NE(off.reason.find("evil.com:443"), std::string::npos) << off.reason;
  EXPECT_NE(off.reason.find("pypi.org"), std::string::npos) << "names the allowlist";
  EXPECT_FALSE(policy->CheckName("pypi.org", 22).allowed);
  EXPECT_FALSE(policy->CheckName("pypi.org", 0).allowed);
  EXPECT_FALSE(policy->CheckName("2130706433", 443).allowed);
  // An allowed name that resolves to an internal address (rebinding) is refused there.
  Decision rebound = policy->CheckAddress(V4("127.0.0.1"), 443);
  EXPECT_FALSE(rebound.allowed);
  EXPECT_NE(rebound.reason.find("loopback"), std::string::npos) << rebound.reason;
  EXPECT_FALSE(policy->CheckAddress(V6("::ffff:169.254.169.254"), 80).allowed);
  EXPECT_TRUE(policy->CheckAddress(V4("151.101.0.223"), 443).allowed);
  // A private address named as a literal is allowed, on its port only.
  EXPECT_TRUE(policy->CheckName("10.0.0.5", 8080).allowed);
  EXPECT_TRUE(policy->CheckAddress(V4("10.0.0.5"), 8080).allowed);
  EXPECT_FALSE(policy->CheckAddress(V4("10.0.0.5"), 443).allowed);
  EXPECT_FALSE(policy->CheckAddress(V4("10.0.0.6"), 8080).allowed);
  // An IP literal is not matched by name patterns.
  EXPECT_FALSE(policy->CheckName("151.101.0.223", 443).allowed);
}

TEST(EgressPolicyTest, OpenStillRefusesInternalAddresses) {
  EgressPolicy open = EgressPolicy::Open();
  EXPECT_TRUE(open.CheckName("anything.example", 443).allowed);
  EXPECT_TRUE(open.CheckName("anything.example", 22).allowed);
  EXPECT_FALSE(open.CheckName("bad name", 443).allowed);
  EXPECT_FALSE(open.CheckAddress(V4("192.168.0.1"), 443).allowed);
  EXPECT_FALSE(open.CheckAddress(V6("::1"), 443).allowed);
  EXPECT_TRUE(open.CheckAddress(V4("8.8.8.8"), 53).allowed);
}

TEST(AddressRangeTest, ParsesAddressesAndRanges) {
  EXPECT_EQ(ParseAddressRange("127.0.0.0/8")->ToString(), "127.0.0.0/8");
  EXPECT_EQ(ParseAddressRange("10.1.2.3")->ToString(), "10.1.2.3/32");
  EXPECT_EQ(ParseAddressRange("192.168.1.5/24")->ToString(), "192.168.1.0/24") << "host bits";
  EXPECT_EQ(ParseAddressRange("0.0.0.0/0")->ToString(), "0.0.0.0/0");
  EXPECT_EQ(ParseAddressRange("FD00::1/8")->ToString(), "fd00::/8");
  EXPECT_EQ(ParseAddressRange("[::1]")->ToString(), "::1/128");
  for (const char* bad : {"", "/8", "10.0.0.0/", "10.0.0.0/33", "fd00::/129", "10.0.0.0/-1",
                          "10.0.0.0/8x", "localhost", "10.0.0/8", "127.1", "10.0.0.0/0008"}) {
    auto r = ParseAddressRange(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("10.0.0.0/8"), std::string::npos) << bad;
    }
  }
}

TEST(AddressRangeTest, ContainsItsAddressesAndTheirMappedForms) {
  auto loopback = *ParseAddressRange("127.0.0.0/8");
  EXPECT_TRUE(loopback.Contains(V4("127.0.0.1")));
  EXPECT_TRUE(loopback.Contains(V4("127.255.255.254")));
  EXPECT_FALSE(loopback.Contains(V4("128.0.0.1")));
  EXPECT_TRUE(loopback.Contains(V6("::ffff:127.0.0.1")));
  EXPECT_FALSE(loopback.Contains(V6("::1"))) << "IPv6 loopback is a range of its own";
  EXPECT_FALSE(loopback.Contains(V6("64:ff9b::127.0.0.1"))) << "NAT64 goes elsewhere";
  auto lan = *ParseAddressRange("192.168.10.0/23");
  EXPECT_TRUE(lan.Contains(V4("192.168.11.200")));
  EXPECT_FALSE(lan.Contains(V4("192.168.12.1")));
  auto ula = *ParseAddressRange("fd12:3456::/32");
  EXPECT_TRUE(ula.Contains(V6("fd12:3456::1")));
  EXPECT_FALSE(ula.Contains(V6("fd12:3457::1")));
  EXPECT_FALSE(ula.Contains(V4("10.0.0.1")));
  auto one = *ParseAddressRange("::1");
  EXPECT_TRUE(one.Contains(V6("::1")));
  EXPECT_FALSE(one.Contains(V6("::2")));
  EXPECT_TRUE(ParseAddressRange("::/0")->Contains(V6("fe80::1")));
}

TEST(EgressPolicyTest, OpenWithRangesAllowsOnlyThoseInternalAddresses) {
  EgressPolicy open =
      EgressPolicy::Open({*ParseAddressRange("127.0.0.0/8"), *ParseAddressRange("10.20.0.0/16")});
  EXPECT_TRUE(open.CheckAddress(V4("127.0.0.1"), 5000).allowed);
  EXPECT_TRUE(open.CheckAddress(V4("127.0.0.2"), 22).allowed) << "any port in a range";
  EXPECT_TRUE(open.CheckAddress(V6("::ffff:127.0.0.1"), 443).allowed);
  EXPECT_TRUE(open.CheckAddress(V4("10.20.3.4"), 443).allowed);
  Decision lan = open.CheckAddress(V4("10.21.0.1"), 443);
  EXPECT_FALSE(lan.allowed);
  EXPECT_NE(lan.reason.find("private"), std::string::npos) << lan.reason;
  EXPECT_FALSE(open.CheckAddress(V6("::1"), 443).allowed);
  EXPECT_FALSE(open.CheckAddress(V4("169.254.169.254"), 80).allowed) << "metadata";
  EXPECT_FALSE(open.CheckAddress(V4("192.168.0.1"), 443).allowed);
  EXPECT_FALSE(open.CheckAddress(V4("100.64.0.1"), 443).allowed) << "CGNAT";
  EXPECT_FALSE(open.CheckAddress(V4("224.0.0.1"), 443).allowed) << "multicast";
  EXPECT_TRUE(open.CheckAddress(V4("8.8.8.8"), 443).allowed);
  Decision in = open.CheckAddress(V4("127.0.0.1"), 5000);
  EXPECT_NE(in.reason.find("127.0.0.0/8"), std::string::npos) << in.reason;
  // A range never lifts the forbidden classes for a box's allowlist policy: it has none.
  auto allow = EgressPolicy::Allow({"example.org"});
  EXPECT_TRUE(allow->ranges().empty());
}

TEST(EgressPolicyTest, AllowNamesTheBadEntry) {
  auto bad = EgressPolicy::Allow({"pypi.org", "*.com"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("*.com"), std::string::npos);
}

}  // namespace
}  // namespace codebox::net
