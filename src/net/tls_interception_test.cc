#include "net/tls_interception.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "base/unique_fd.h"

namespace codebox::net {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// A connected pair: [0] non-blocking (the proxy's end), [1] blocking with 5 s timeouts (the
// test's peer, driven by plain blocking OpenSSL calls in a thread).
struct Pair {
  base::UniqueFd proxy, peer;
};
Pair MakePair() {
  int fds[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  Pair p{base::UniqueFd(fds[0]), base::UniqueFd(fds[1])};
  ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  timeval tv{5, 0};
  ::setsockopt(fds[1], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fds[1], SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return p;
}

std::string Errors() {
  std::string text;
  while (unsigned long e = ERR_get_error()) {
    char buffer[256];
    ERR_error_string_n(e, buffer, sizeof buffer);
    text += std::string(buffer) + "; ";
  }
  return text;
}

// A client context that trusts only `ca_pem`, strict as Python 3.13's default.
std::shared_ptr<SSL_CTX> ClientTrusting(const std::string& ca_pem) {
  std::shared_ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
  BIO* bio = BIO_new_mem_buf(ca_pem.data(), static_cast<int>(ca_pem.size()));
  X509* ca = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  EXPECT_NE(ca, nullptr);
  X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx.get()), ca);
  X509_free(ca);
  X509_STORE_set_flags(SSL_CTX_get_cert_store(ctx.get()), X509_V_FLAG_X509_STRICT);
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  static const unsigned char kAlpn[] = "\x02h2\x08http/1.1";
  SSL_CTX_set_alpn_protos(ctx.get(), kAlpn, sizeof kAlpn - 1);
  return ctx;
}

// The box: a blocking OpenSSL client on `fd`.
class BoxClient {
 public:
  explicit BoxClient(std::shared_ptr<SSL_CTX> c) : ctx(std::move(c)) {}
  BoxClient(const BoxClient&) = delete;
  BoxClient& operator=(const BoxClient&) = delete;
  ~BoxClient() { SSL_free(ssl); }
  std::shared_ptr<SSL_CTX> ctx;
  SSL* ssl = nullptr;
  std::string error;
  // `sni` empty: none sent. `verify_ip`: check an IP SAN instead of a name.
  bool Connect(int fd, const std::string& sni, const std::string& verify_name, bool verify_ip) {
    ssl = SSL_new(ctx.get());
    SSL_set_fd(ssl, fd);
    if (!sni.empty()) SSL_set_tlsext_host_name(ssl, sni.c_str());
    if (verify_ip) {
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), verify_name.c_str());
    } else {
      SSL_set1_host(ssl, verify_name.c_str());
    }
    if (SSL_connect(ssl) != 1) {
      error = Errors() + X509_verify_cert_error_string(SSL_get_verify_result(ssl));
      return false;
    }
    return true;
  }
};

// Reads from `s` until `want` bytes came or EOF, polling as the stream says.
std::string ReadFromStream(ByteStream& s, size_t want, bool* eof = nullptr) {
  std::string got;
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  char buffer[16384];
  while (got.size() < want && Clock::now() < deadline) {
    auto r = s.Read(buffer, sizeof buffer);
    if (r.io == ByteStream::Io::kDone) {
      got.append(buffer, r.bytes);
    } else if (r.io == ByteStream::Io::kWantRead || r.io == ByteStream::Io::kWantWrite) {
      pollfd p{s.fd(), static_cast<short>(r.io == ByteStream::Io::kWantRead ? POLLIN : POLLOUT), 0};
      ::poll(&p, 1, 100);
    } else {
      if (eof != nullptr) *eof = r.io == ByteStream::Io::kEof;
      EXPECT_EQ(r.io, ByteStream::Io::kEof) << r.error;
      break;
    }
  }
  return got;
}

bool WriteToStream(ByteStream& s, std::string_view data) {
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (!data.empty() && Clock::now() < deadline) {
    auto r = s.Write(data.data(), data.size());
    if (r.io == ByteStream::Io::kDone) {
      data.remove_prefix(r.bytes);
    } else if (r.io == ByteStream::Io::kWantRead || r.io == ByteStream::Io::kWantWrite) {
      pollfd p{s.fd(), static_cast<short>(r.io == ByteStream::Io::kWantRead ? POLLIN : POLLOUT), 0};
      ::poll(&p, 1, 100);
    } else {
      ADD_FAILURE() << r.error;
      return false;
    }
  }
  return data.empty();
}

std::string SslReadAll(SSL* ssl, size_t want) {
  std::string got;
  char buffer[16384];
  while (got.size() < want) {
    int n = SSL_read(ssl, buffer, sizeof buffer);
    if (n <= 0) break;
    got.append(buffer, static_cast<size_t>(n));
  }
  return got;
}

std::shared_ptr<BoxCertificateAuthority> NewCa(std::string_view label = "test") {
  auto ca = BoxCertificateAuthority::Create(label);
  EXPECT_TRUE(ca.ok()) << ca.status().ToString();
  return *ca;
}

TEST(TlsInterception, BoxHandshakeAndDataBothWays) {
  auto ca = NewCa("box-1");
  auto ctx = ca->ServerContextFor("api.example.test");
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  Pair pair = MakePair();
  const std::string big(200'000, 'x');  // more than a socket buffer: partial writes
  bool connected = false, saw_close_notify = false;
  std::string client_got, alpn, client_error;
  std::thread box([&] {
    BoxClient client(ClientTrusting(ca->CertificatePem()));
    connected = client.Connect(pair.peer.get(), "api.example.test", "api.example.test", false);
    client_error = client.error;
    if (!connected) return;
    const unsigned char* proto = nullptr;
    unsigned int len = 0;
    SSL_get0_alpn_selected(client.ssl, &proto, &len);
    alpn.assign(reinterpret_cast<const char*>(proto), len);
    SSL_write(client.ssl, "hello from the box", 18);
    client_got = SslReadAll(client.ssl, big.size() + 1);
    saw_close_notify = SSL_get_error(client.ssl, 0) == SSL_ERROR_ZERO_RETURN ||
                       (SSL_get_shutdown(client.ssl) & SSL_RECEIVED_SHUTDOWN) != 0;
    SSL_shutdown(client.ssl);
  });
  auto stream = AcceptBoxTls(pair.proxy.get(), *ctx, "api.example.test", milliseconds(5'000));
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  EXPECT_EQ(ReadFromStream(**stream, 18), "hello from the box");
  EXPECT_TRUE(WriteToStream(**stream, big));
  (*stream)->ShutdownWrite();
  bool eof = false;
  EXPECT_EQ(ReadFromStream(**stream, 1, &eof), "");
  EXPECT_TRUE(eof);
  box.join();
  EXPECT_TRUE(connected) << client_error;
  EXPECT_EQ(alpn, "http/1.1");
  EXPECT_EQ(client_got.size(), big.size());
  EXPECT_EQ(client_got, big);
  EXPECT_TRUE(saw_close_notify);
}

TEST(TlsInterception, PeerClosingWithoutCloseNotifyIsEof) {
  auto ca = NewCa();
  auto ctx = ca->ServerContextFor("api.example.test");
  ASSERT_TRUE(ctx.ok());
  Pair pair = MakePair();
  std::thread box([&] {
    BoxClient client(ClientTrusting(ca->CertificatePem()));
    if (!client.Connect(pair.peer.get(), "", "api.example.test", false)) return;
    SSL_write(client.ssl, "bye", 3);
    ::shutdown(pair.peer.get(), SHUT_RDWR);  // no close_notify
  });
  auto stream = AcceptBoxTls(pair.proxy.get(), *ctx, "api.example.test", milliseconds(5'000));
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  bool eof = false;
  EXPECT_EQ(ReadFromStream(**stream, 100, &eof), "bye");
  EXPECT_TRUE(eof);
  box.join();
}

TEST(TlsInterception, IpLiteralGetsAnIpSan) {
  auto ca = NewCa();
  auto ctx = ca->ServerContextFor("127.0.0.1");
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  Pair pair = MakePair();
  bool connected = false;
  std::string error;
  std::thread box([&] {
    BoxClient client(ClientTrusting(ca->CertificatePem()));
    connected = client.Connect(pair.peer.get(), "", "127.0.0.1", /*verify_ip=*/true);
    error = client.error;
    if (connected) SSL_write(client.ssl, "x", 1);
  });
  auto stream = AcceptBoxTls(pair.proxy.get(), *ctx, "127.0.0.1", milliseconds(5'000));
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  EXPECT_EQ(ReadFromStream(**stream, 1), "x");
  box.join();
  EXPECT_TRUE(connected) << error;
}

TEST(TlsInterception, SniForAnotherHostIsRefused) {
  auto ca = NewCa();
  auto ctx = ca->ServerContextFor("api.example.test");
  ASSERT_TRUE(ctx.ok());
  Pair pair = MakePair();
  bool connected = true;
  std::thread box([&] {
    BoxClient client(ClientTrusting(ca->CertificatePem()));
    connected = client.Connect(pair.peer.get(), "evil.example.test", "api.example.test", false);
  });
  auto stream = AcceptBoxTls(pair.proxy.get(), *ctx, "api.example.test", milliseconds(5'000));
  box.join();
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(stream.status().message(),
            "the box's TLS asked for evil.example.test but its CONNECT named api.example.test");
  EXPECT_FALSE(connected);
}

TEST(TlsInterception, SniMatchesIgnoringCaseAndTrailingDot) {
  auto ca = NewCa();
  auto ctx = ca->ServerContextFor("api.example.test");
  ASSERT_TRUE(ctx.ok());
  Pair pair = MakePair();
  bool connected = false;
  std::thread box([&] {
    BoxClient client(ClientTrusting(ca->CertificatePem()));
    connected = client.Connect(pair.peer.get(), "API.Example.Test.", "api.example.test", false);
  });
  auto stream = AcceptBoxTls(pair.proxy.get(), *ctx, "api.example.test", milliseconds(5'000));
  box.join();
  EXPECT_TRUE(stream.ok()) << stream.status().ToString();
  EXPECT_TRUE(connected);
}

TEST(TlsInterception, GarbageInsteadOfAClientHelloIsAnError) {
  auto ca = NewCa();
  auto ctx = ca->ServerContextFor("api.example.test");
  ASSERT_TRUE(ctx.ok());
  for (std::string garbage :
       {std::string("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
        std::string("\x16\x03\x01\x00\x08\xff\x00\x00\x04junk", 13),  // no such message
        std::string("\x16\x03\x01\xff\xff", 5),                       // a record past the cap,
        std::string(64, '\0')}) {
    Pair pair = MakePair();
    ASSERT_EQ(::write(pair.peer.get(), garbage.data(), garbage.size()),
              static_cast<ssize_t>(garbage.size()));
    const auto start = Clock::now();
    auto stream = AcceptBoxTls(pair.proxy.get(), *ctx, "api.example.test", milliseconds(5'000));
    ASSERT_FALSE(stream.ok());
    EXPECT_EQ(stream.status().code(), StatusCode::kInvalidArgument) << stream.status().ToString();
    EXPECT_NE(stream.status().message().find("TLS handshake"), std::string::npos)
        << stream.status().message();
    EXPECT_LT(Clock::now() - start, milliseconds(2'000));
  }
}

TEST(TlsInterception, SilenceRunsIntoTheDeadline) {
  auto ca = NewCa();
  auto ctx = ca->ServerContextFor("api.example.test");
  ASSERT_TRUE(ctx.ok());
  Pair pair = MakePair();
  const auto start = Clock::now();
  auto stream = AcceptBoxTls(pair.proxy.get(), *ctx, "api.example.test", milliseconds(300));
  const auto took = Clock::now() - start;
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), StatusCode::kDeadlineExceeded) << stream.status().ToString();
  EXPECT_GE(took, milliseconds(290));
  EXPECT_LT(took, milliseconds(2'000));
}

TEST(TlsInterception, BoxHangingUpMidHandshakeIsAnError) {
  auto ca = NewCa();
  auto ctx = ca->ServerContextFor("api.example.test");
  ASSERT_TRUE(ctx.ok());
  Pair pair = MakePair();
  pair.peer.reset();
  auto stream = AcceptBoxTls(pair.proxy.get(), *ctx, "api.example.test", milliseconds(5'000));
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), StatusCode::kInvalidArgument) << stream.status().ToString();
}

TEST(TlsInterception, ServerContextsAreCachedPerHost) {
  auto ca = NewCa();
  auto a = ca->ServerContextFor("api.example.test");
  auto b = ca->ServerContextFor("api.example.test");
  auto c = ca->ServerContextFor("other.example.test");
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->get(), b->get());
  EXPECT_NE(a->get(), c->get());
  for (int i = 0; i < 300; ++i) {  // past the cap: still works, old entries dropped
    ASSERT_TRUE(ca->ServerContextFor("h" + std::to_string(i) + ".example.test").ok());
  }
  auto again = ca->ServerContextFor("api.example.test");
  ASSERT_TRUE(again.ok());
  EXPECT_NE(again->get(), nullptr);
}

TEST(TlsInterception, HostNamesThatCouldNotBeCertifiedAreRefused) {
  auto ca = NewCa();
  for (std::string bad :
       {std::string(), std::string("a,DNS:evil.test"), std::string("a b"),
        std::string("*.example.test"), std::string(300, 'a'), std::string("x\0y", 3)}) {
    auto ctx = ca->ServerContextFor(bad);
    EXPECT_FALSE(ctx.ok()) << bad;
    if (!ctx.ok()) {
      EXPECT_EQ(ctx.status().code(), StatusCode::kInvalidArgument);
    }
  }
}

TEST(TlsInterception, CaCertificateIsAConstrainedCa) {
  auto ca = NewCa("box \x01label");
  const std::string& pem = ca->CertificatePem();
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  ASSERT_NE(cert, nullptr);
  EXPECT_EQ(X509_check_ca(cert), 1);
  EXPECT_EQ(X509_get_version(cert), X509_VERSION_3);
  EXPECT_EQ(X509_get_pathlen(cert), 0);
  EXPECT_TRUE(X509_get_key_usage(cert) & KU_KEY_CERT_SIGN);
  EXPECT_NE(X509_get0_subject_key_id(cert), nullptr);
  char cn[256] = "";
  X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof cn);
  EXPECT_EQ(std::string(cn), "codebox box CA box ?label");
  EXPECT_EQ(pem.find("PRIVATE"), std::string::npos);
  X509_free(cert);
  EXPECT_NE(NewCa("b")->CertificatePem(), pem);
}

// An upstream served by a second CA through AcceptBoxTls: `cert_host` is what its certificate
// names, `expected` the SNI it takes.
class TlsUpstream {
 public:
  TlsUpstream(const std::string& cert_host, const std::string& expected) : pair_(MakePair()) {
    ca_ = NewCa("upstream");
    auto ctx = ca_->ServerContextFor(cert_host);
    EXPECT_TRUE(ctx.ok());
    // The server runs on the pair's blocking end: make it non-blocking for AcceptBoxTls.
    ::fcntl(pair_.peer.get(), F_SETFL, ::fcntl(pair_.peer.get(), F_GETFL) | O_NONBLOCK);
    thread_ = std::thread([this, ctx = *ctx, expected] {
      auto stream = AcceptBoxTls(pair_.peer.get(), ctx, expected, milliseconds(5'000));
      if (!stream.ok()) return;
      std::string got = ReadFromStream(**stream, 4);
      WriteToStream(**stream, "echo:" + got);
      (*stream)->ShutdownWrite();
    });
    char path[] = "/tmp/codebox-tls-test-XXXXXX";
    int fd = ::mkstemp(path);
    EXPECT_GE(fd, 0);
    ::close(fd);
    ca_file_ = path;
    std::ofstream(ca_file_) << ca_->CertificatePem();
  }
  ~TlsUpstream() {
    ::shutdown(pair_.proxy.get(), SHUT_RDWR);  // a server still waiting sees EOF
    if (thread_.joinable()) thread_.join();
    std::remove(ca_file_.c_str());
  }
  int proxy_fd() const { return pair_.proxy.get(); }
  const std::string& ca_file() const { return ca_file_; }

 private:
  Pair pair_;
  std::shared_ptr<BoxCertificateAuthority> ca_;
  std::thread thread_;
  std::string ca_file_;
};

TEST(TlsInterception, UpstreamVerifiedAgainstTheCaFile) {
  TlsUpstream upstream("upstream.example.test", "upstream.example.test");
  auto ctx = MakeUpstreamContext({upstream.ca_file()});
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  auto stream =
      ConnectUpstreamTls(upstream.proxy_fd(), *ctx, "upstream.example.test", milliseconds(5'000));
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  EXPECT_TRUE(WriteToStream(**stream, "ping"));
  bool eof = false;
  EXPECT_EQ(ReadFromStream(**stream, 100, &eof), "echo:ping");
  EXPECT_TRUE(eof);
}

TEST(TlsInterception, UpstreamIpLiteralVerified) {
  TlsUpstream upstream("127.0.0.1", "127.0.0.1");
  auto ctx = MakeUpstreamContext({upstream.ca_file()});
  ASSERT_TRUE(ctx.ok());
  auto stream = ConnectUpstreamTls(upstream.proxy_fd(), *ctx, "127.0.0.1", milliseconds(5'000));
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  EXPECT_TRUE(WriteToStream(**stream, "ping"));
  EXPECT_EQ(ReadFromStream(**stream, 100), "echo:ping");
}

TEST(TlsInterception, UpstreamWithAnotherNameIsNotTrusted) {
  TlsUpstream upstream("upstream.example.test", "other.example.test");
  auto ctx = MakeUpstreamContext({upstream.ca_file()});
  ASSERT_TRUE(ctx.ok());
  auto stream =
      ConnectUpstreamTls(upstream.proxy_fd(), *ctx, "other.example.test", milliseconds(5'000));
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(stream.status().message().find("certificate was not trusted"), std::string::npos)
      << stream.status().message();
  EXPECT_NE(stream.status().message().find("other.example.test"), std::string::npos);
}

TEST(TlsInterception, UpstreamNotInTheDefaultStoreIsNotTrusted) {
  TlsUpstream upstream("upstream.example.test", "upstream.example.test");
  auto ctx = MakeUpstreamContext({});
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  auto stream =
      ConnectUpstreamTls(upstream.proxy_fd(), *ctx, "upstream.example.test", milliseconds(5'000));
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(stream.status().message().find("certificate was not trusted"), std::string::npos)
      << stream.status().message();
}

TEST(TlsInterception, UpstreamSilenceRunsIntoTheDeadline) {
  Pair pair = MakePair();
  auto ctx = MakeUpstreamContext({});
  ASSERT_TRUE(ctx.ok());
  auto stream =
      ConnectUpstreamTls(pair.proxy.get(), *ctx, "upstream.example.test", milliseconds(300));
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), StatusCode::kDeadlineExceeded) << stream.status().ToString();
}

TEST(TlsInterception, MissingCaFileIsNamed) {
  auto ctx = MakeUpstreamContext({"/nonexistent/codebox-ca.pem"});
  ASSERT_FALSE(ctx.ok());
  EXPECT_NE(ctx.status().message().find("/nonexistent/codebox-ca.pem"), std::string::npos)
      << ctx.status().message();
}

TEST(TlsInterception, CaFileWithoutCertificatesIsNamed) {
  char path[] = "/tmp/codebox-tls-test-XXXXXX";
  int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "not a pem\n", 10), 10);
  ::close(fd);
  auto ctx = MakeUpstreamContext({path});
  std::remove(path);
  ASSERT_FALSE(ctx.ok());
  EXPECT_NE(ctx.status().message().find(path), std::string::npos) << ctx.status().message();
}

}  // namespace
}  // namespace codebox::net
