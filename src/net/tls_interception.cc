#include "net/tls_interception.h"

#include <arpa/inet.h>
#include <errno.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>

namespace codebox::net {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

template <typename T, void (*F)(T*)>
struct Free {
  void operator()(T* p) const { F(p); }
};
using Pkey = std::unique_ptr<EVP_PKEY, Free<EVP_PKEY, EVP_PKEY_free>>;
using Cert = std::unique_ptr<X509, Free<X509, X509_free>>;
using Bio = std::unique_ptr<BIO, Free<BIO, BIO_free_all>>;
using Bignum = std::unique_ptr<BIGNUM, Free<BIGNUM, BN_free>>;
using Extension = std::unique_ptr<X509_EXTENSION, Free<X509_EXTENSION, X509_EXTENSION_free>>;
using Names = std::unique_ptr<GENERAL_NAMES, Free<GENERAL_NAMES, GENERAL_NAMES_free>>;
using Ssl = std::unique_ptr<SSL, Free<SSL, SSL_free>>;

constexpr int kMaxCachedHosts = 256;
constexpr long kValiditySeconds = 30L * 24 * 3600;
constexpr long kBackdateSeconds = 3600;  // clocks in the box may lag the host's

// The OpenSSL errors queued on this thread, as text; the queue is left empty.
std::string OpenSslErrors() {
  std::string text;
  while (unsigned long e = ERR_get_error()) {
    char buffer[256];
    ERR_error_string_n(e, buffer, sizeof buffer);
    if (!text.empty()) text += "; ";
    text += buffer;
  }
  return text.empty() ? "no OpenSSL error queued" : text;
}

Status OpenSslError(std::string_view what) {
  return Internal(std::string(what) + ": " + OpenSslErrors());
}

// What the box or an upstream sent, fit for an error message: printable ASCII, 100 bytes.
std::string Excerpt(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, 100)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (text.size() > 100) out += "...";
  return out;
}

std::string NormalizeName(std::string_view name) {
  if (!name.empty() && name.back() == '.') name.remove_suffix(1);
  std::string out(name);
  for (char& c : out) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  return out;
}

// The address bytes of an IP literal ("10.0.0.1", "::1", "[::1]"); empty when not one.
std::string IpBytes(std::string_view host) {
  std::string text(host);
  if (text.size() > 2 && text.front() == '[' && text.back() == ']') {
    text = text.substr(1, text.size() - 2);
  }
  unsigned char bytes[16];
  if (inet_pton(AF_INET, text.c_str(), bytes) == 1) return std::string(bytes, bytes + 4);
  if (inet_pton(AF_INET6, text.c_str(), bytes) == 1) return std::string(bytes, bytes + 16);
  return "";
}

// --- A socket BIO that writes with MSG_NOSIGNAL: a box that hangs up must not SIGPIPE us. ---

struct SocketBioState {
  int fd = -1;
  bool eof = false;
};

int SocketBioWrite(BIO* bio, const char* data, int size) {
  auto* state = static_cast<SocketBioState*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  ssize_t n = ::send(state->fd, data, static_cast<size_t>(size), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
    BIO_set_retry_write(bio);
  }
  return static_cast<int>(n);
}

int SocketBioRead(BIO* bio, char* data, int size) {
  auto* state = static_cast<SocketBioState*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  ssize_t n = ::recv(state->fd, data, static_cast<size_t>(size), MSG_DONTWAIT);
  if (n == 0) state->eof = true;
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
    BIO_set_retry_read(bio);
  }
  return static_cast<int>(n);
}

long SocketBioCtrl(BIO* bio, int cmd, long, void* ptr) {
  auto* state = static_cast<SocketBioState*>(BIO_get_data(bio));
  switch (cmd) {
    case BIO_CTRL_FLUSH:
      return 1;
    case BIO_CTRL_EOF:  // OpenSSL asks this to tell a peer's EOF from an error
      return state->eof ? 1 : 0;
    case BIO_C_GET_FD:
      if (ptr != nullptr) *static_cast<int*>(ptr) = state->fd;
      return state->fd;
    default:
      return 0;
  }
}

int SocketBioDestroy(BIO* bio) {
  delete static_cast<SocketBioState*>(BIO_get_data(bio));
  BIO_set_data(bio, nullptr);
  return 1;
}

const BIO_METHOD* SocketBioMethod() {
  static const BIO_METHOD* method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR,
                                 "codebox socket");
    if (m == nullptr) return static_cast<BIO_METHOD*>(nullptr);
    BIO_meth_set_write(m, SocketBioWrite);
    BIO_meth_set_read(m, SocketBioRead);
    BIO_meth_set_ctrl(m, SocketBioCtrl);
    BIO_meth_set_destroy(m, SocketBioDestroy);
    return m;
  }();
  return method;
}

// A new SSL on `fd` for `ctx`, in the modes the relay needs.
StatusOr<Ssl> NewSsl(SSL_CTX* ctx, int fd) {
  ERR_clear_error();
  const BIO_METHOD* method = SocketBioMethod();
  if (method == nullptr) return OpenSslError("TLS: make the socket BIO method");
  Ssl ssl(SSL_new(ctx));
  if (!ssl) return OpenSslError("TLS: SSL_new");
  BIO* bio = BIO_new(method);
  if (bio == nullptr) return OpenSslError("TLS: BIO_new");
  BIO_set_data(bio, new SocketBioState{fd, false});
  BIO_set_init(bio, 1);
  SSL_set_bio(ssl.get(), bio, bio);
  SSL_set_mode(ssl.get(), SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_set_options(ssl.get(), SSL_OP_IGNORE_UNEXPECTED_EOF);
  return ssl;
}

// --- The stream. ---

class TlsStream : public ByteStream {
 public:
  TlsStream(Ssl ssl, std::shared_ptr<SSL_CTX> ctx, int fd)
      : ctx_(std::move(ctx)), ssl_(std::move(ssl)), fd_(fd) {}

  int fd() const override { return fd_; }

  Result Read(char* buffer, size_t size) override {
    if (size == 0) return {Io::kDone, 0, ""};
    ERR_clear_error();
    errno = 0;
    int n = SSL_read(ssl_.get(), buffer, static_cast<int>(std::min<size_t>(size, INT_MAX)));
    if (n > 0) return {Io::kDone, static_cast<size_t>(n), ""};
    return Failure(n, /*reading=*/true);
  }

  Result Write(const char* data, size_t size) override {
    if (size == 0) return {Io::kDone, 0, ""};
    ERR_clear_error();
    errno = 0;
    int n = SSL_write(ssl_.get(), data, static_cast<int>(std::min<size_t>(size, INT_MAX)));
    if (n > 0) return {Io::kDone, static_cast<size_t>(n), ""};
    return Failure(n, /*reading=*/false);
  }

  bool HasBuffered() const override { return SSL_pending(ssl_.get()) > 0; }

  void ShutdownWrite() override {
    if (shut_down_) return;
    shut_down_ = true;
    if (!failed_) {
      ERR_clear_error();
      (void)SSL_shutdown(ssl_.get());  // one try: a close_notify that does not fit is dropped
      ERR_clear_error();
    }
    ::shutdown(fd_, SHUT_WR);
  }

 private:
  Result Failure(int n, bool reading) {
    int saved_errno = errno;
    switch (SSL_get_error(ssl_.get(), n)) {
      case SSL_ERROR_WANT_READ:
        return {Io::kWantRead, 0, ""};
      case SSL_ERROR_WANT_WRITE:
        return {Io::kWantWrite, 0, ""};
      case SSL_ERROR_ZERO_RETURN:  // close_notify, or (SSL_OP_IGNORE_UNEXPECTED_EOF) a bare EOF
        if (reading) return {Io::kEof, 0, ""};
        failed_ = true;
        return {Io::kError, 0, "TLS: the peer has closed the connection"};
      case SSL_ERROR_SYSCALL:
        failed_ = true;
        if (reading && saved_errno == 0 && ERR_peek_error() == 0) return {Io::kEof, 0, ""};
        return {Io::kError, 0,
                saved_errno != 0 ? std::string("TLS: ") + strerror(saved_errno)
                                 : "TLS: " + OpenSslErrors()};
      default:
        failed_ = true;
        return {Io::kError, 0, "TLS: " + OpenSslErrors()};
    }
  }

  std::shared_ptr<SSL_CTX> ctx_;  // before ssl_: freed after it
  Ssl ssl_;
  int fd_;
  bool failed_ = false;  // no SSL_shutdown after a fatal error
  bool shut_down_ = false;
};

// --- Handshakes. ---

enum class HandshakeEnd { kDone, kTimeout, kClosed, kFailed };
struct HandshakeResult {
  HandshakeEnd end = HandshakeEnd::kFailed;
  std::string error;
};

HandshakeResult Handshake(SSL* ssl, int fd, bool server, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    ERR_clear_error();
    errno = 0;
    int r = server ? SSL_accept(ssl) : SSL_connect(ssl);
    if (r == 1) return {HandshakeEnd::kDone, ""};
    int saved_errno = errno;
    short events = 0;
    switch (SSL_get_error(ssl, r)) {
      case SSL_ERROR_WANT_READ:
        events = POLLIN;
        break;
      case SSL_ERROR_WANT_WRITE:
        events = POLLOUT;
        break;
      case SSL_ERROR_ZERO_RETURN:
        return {HandshakeEnd::kClosed, ""};
      case SSL_ERROR_SYSCALL:
        if (ERR_peek_error() != 0) return {HandshakeEnd::kFailed, OpenSslErrors()};
        if (saved_errno == 0) return {HandshakeEnd::kClosed, ""};
        return {HandshakeEnd::kFailed, strerror(saved_errno)};
      default: {
        unsigned long e = ERR_peek_last_error();
        // With SSL_OP_IGNORE_UNEXPECTED_EOF a bare EOF mid-handshake still fails; say "closed".
        if (ERR_GET_REASON(e) == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
          ERR_clear_error();
          return {HandshakeEnd::kClosed, ""};
        }
        return {HandshakeEnd::kFailed, OpenSslErrors()};
      }
    }
    int p = PollFor(fd, events, deadline);
    if (p == 0) return {HandshakeEnd::kTimeout, ""};
    if (p < 0) return {HandshakeEnd::kFailed, std::string("poll: ") + strerror(errno)};
  }
}

// Per-connection state for the server name callback (the SSL's app data during SSL_accept).
struct SniCheck {
  std::string expected;  // normalized
  std::string asked;     // the SNI the box sent, when refused
  bool refused = false;
};

int CheckServerName(SSL* ssl, int* alert, void*) {
  auto* check = static_cast<SniCheck*>(SSL_get_app_data(ssl));
  if (check == nullptr) {  // only during AcceptBoxTls; renegotiation is off
    *alert = SSL_AD_INTERNAL_ERROR;
    return SSL_TLSEXT_ERR_ALERT_FATAL;
  }
  const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
  if (name == nullptr) return SSL_TLSEXT_ERR_OK;  // no SNI: the CONNECT named the host
  if (NormalizeName(name) == check->expected) return SSL_TLSEXT_ERR_OK;
  check->asked = name;
  check->refused = true;
  *alert = SSL_AD_UNRECOGNIZED_NAME;
  return SSL_TLSEXT_ERR_ALERT_FATAL;
}

int SelectAlpn(SSL*, const unsigned char** out, unsigned char* out_len, const unsigned char* in,
               unsigned int in_len, void*) {
  // Only HTTP/1.1, which the proxy rewrites; a client offering nothing else gets no ALPN.
  for (unsigned int i = 0; i < in_len;) {
    unsigned int len = in[i];
    if (i + 1 + len > in_len) break;
    if (len == 8 && std::memcmp(in + i + 1, "http/1.1", 8) == 0) {
      *out = in + i + 1;
      *out_len = 8;
      return SSL_TLSEXT_ERR_OK;
    }
    i += 1 + len;
  }
  return SSL_TLSEXT_ERR_NOACK;
}

// --- Certificates. ---

Status SetRandomSerial(X509* cert) {
  unsigned char bytes[16];
  do {
    if (RAND_bytes(bytes, sizeof bytes) != 1) return OpenSslError("certificate serial");
  } while (std::all_of(bytes, bytes + sizeof bytes, [](unsigned char b) { return b == 0; }));
  Bignum bn(BN_bin2bn(bytes, sizeof bytes, nullptr));
  if (!bn || BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(cert)) == nullptr) {
    return OpenSslError("certificate serial");
  }
  return Status::Ok();
}

// A version 3 certificate for `key` with `subject`, a random serial, valid from an hour ago
// for 30 days; extensions and the signature are the caller's.
StatusOr<Cert> NewCertificate(EVP_PKEY* key, X509_NAME* subject) {
  Cert cert(X509_new());
  if (!cert) return OpenSslError("X509_new");
  RETURN_IF_ERROR(SetRandomSerial(cert.get()));
  if (X509_set_version(cert.get(), X509_VERSION_3) != 1 ||
      X509_gmtime_adj(X509_getm_notBefore(cert.get()), -kBackdateSeconds) == nullptr ||
      X509_gmtime_adj(X509_getm_notAfter(cert.get()), kValiditySeconds - kBackdateSeconds) ==
          nullptr ||
      X509_set_subject_name(cert.get(), subject) != 1 || X509_set_pubkey(cert.get(), key) != 1) {
    return OpenSslError("certificate fields");
  }
  return cert;
}

Status AddExtension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  Extension ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value));
  if (!ext || X509_add_ext(cert, ext.get(), -1) != 1) {
    return OpenSslError(std::string("certificate extension ") + OBJ_nid2sn(nid));
  }
  return Status::Ok();
}

Status AddName(X509_NAME* name, int nid, const std::string& value) {
  if (X509_NAME_add_entry_by_NID(name, nid, MBSTRING_ASC,
                                 reinterpret_cast<const unsigned char*>(value.c_str()), -1, -1,
                                 0) != 1) {
    return OpenSslError(std::string("certificate name ") + OBJ_nid2sn(nid));
  }
  return Status::Ok();
}

StatusOr<Pkey> NewKey() {
  ERR_clear_error();
  Pkey key(EVP_EC_gen("P-256"));
  if (!key) return OpenSslError("make an EC P-256 key");
  return key;
}

std::string ToPem(X509* cert) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1) return "";
  char* data = nullptr;
  long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(size));
}

std::shared_ptr<SSL_CTX> WrapContext(SSL_CTX* ctx) {
  return std::shared_ptr<SSL_CTX>(ctx, SSL_CTX_free);
}

}  // namespace

struct BoxCertificateAuthority::Impl {
  Pkey key;
  Cert cert;
  Pkey leaf_key;  // one for every host this CA signs for
  std::string pem;
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<SSL_CTX>> contexts;
  std::deque<std::string> order;  // oldest first

  StatusOr<Cert> LeafFor(const std::string& host, const std::string& ip) {
    X509_NAME* subject = X509_NAME_new();
    if (subject == nullptr) return OpenSslError("X509_NAME_new");
    std::unique_ptr<X509_NAME, Free<X509_NAME, X509_NAME_free>> subject_owner(subject);
    RETURN_IF_ERROR(AddName(subject, NID_organizationName, "codebox"));
    if (host.size() <= 64) RETURN_IF_ERROR(AddName(subject, NID_commonName, host));  // CN cap
    ASSIGN_OR_RETURN(Cert leaf, NewCertificate(leaf_key.get(), subject));
    if (X509_set_issuer_name(leaf.get(), X509_get_subject_name(cert.get())) != 1) {
      return OpenSslError("certificate issuer");
    }
    RETURN_IF_ERROR(AddExtension(leaf.get(), cert.get(), NID_basic_constraints, "CA:FALSE"));
    RETURN_IF_ERROR(
        AddExtension(leaf.get(), cert.get(), NID_key_usage, "critical,digitalSignature"));
    RETURN_IF_ERROR(AddExtension(leaf.get(), cert.get(), NID_ext_key_usage, "serverAuth"));
    RETURN_IF_ERROR(AddExtension(leaf.get(), cert.get(), NID_subject_key_identifier, "hash"));
    RETURN_IF_ERROR(
        AddExtension(leaf.get(), cert.get(), NID_authority_key_identifier, "keyid:always"));
    // The SAN built as a structure, not from config text, so no name can smuggle in another.
    Names names(GENERAL_NAMES_new());
    GENERAL_NAME* name = GENERAL_NAME_new();
    if (!names || name == nullptr) return OpenSslError("subjectAltName");
    if (!ip.empty()) {
      ASN1_OCTET_STRING* address = ASN1_OCTET_STRING_new();
      if (address == nullptr ||
          ASN1_OCTET_STRING_set(address, reinterpret_cast<const unsigned char*>(ip.data()),
                                static_cast<int>(ip.size())) != 1) {
        ASN1_OCTET_STRING_free(address);
        GENERAL_NAME_free(name);
        return OpenSslError("subjectAltName");
      }
      GENERAL_NAME_set0_value(name, GEN_IPADD, address);
    } else {
      ASN1_IA5STRING* dns = ASN1_IA5STRING_new();
      if (dns == nullptr || ASN1_STRING_set(dns, host.data(), static_cast<int>(host.size())) != 1) {
        ASN1_IA5STRING_free(dns);
        GENERAL_NAME_free(name);
        return OpenSslError("subjectAltName");
      }
      GENERAL_NAME_set0_value(name, GEN_DNS, dns);
    }
    if (sk_GENERAL_NAME_push(names.get(), name) == 0) {
      GENERAL_NAME_free(name);
      return OpenSslError("subjectAltName");
    }
    if (X509_add1_ext_i2d(leaf.get(), NID_subject_alt_name, names.get(), 0, 0) != 1) {
      return OpenSslError("subjectAltName");
    }
    if (X509_sign(leaf.get(), key.get(), EVP_sha256()) == 0) {
      return OpenSslError("sign the certificate for " + host);
    }
    return leaf;
  }

  StatusOr<std::shared_ptr<SSL_CTX>> ContextFor(const std::string& host, const std::string& ip) {
    ASSIGN_OR_RETURN(Cert leaf, LeafFor(host, ip));
    std::shared_ptr<SSL_CTX> ctx = WrapContext(SSL_CTX_new(TLS_server_method()));
    if (!ctx) return OpenSslError("SSL_CTX_new");
    SSL_CTX* c = ctx.get();
    if (SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION) != 1 ||
        SSL_CTX_use_certificate(c, leaf.get()) != 1 ||
        SSL_CTX_use_PrivateKey(c, leaf_key.get()) != 1 || SSL_CTX_check_private_key(c) != 1) {
      return OpenSslError("server context for " + host);
    }
    // No resumption (each connection is checked afresh) and no renegotiation.
    SSL_CTX_set_options(c, SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION |
                               SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_num_tickets(c, 0);
    SSL_CTX_set_tlsext_servername_callback(c, CheckServerName);
    SSL_CTX_set_alpn_select_cb(c, SelectAlpn, nullptr);
    return ctx;
  }
};

BoxCertificateAuthority::BoxCertificateAuthority(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
BoxCertificateAuthority::~BoxCertificateAuthority() = default;

StatusOr<std::shared_ptr<BoxCertificateAuthority>> BoxCertificateAuthority::Create(
    std::string_view label) {
  ERR_clear_error();
  auto impl = std::make_unique<Impl>();
  ASSIGN_OR_RETURN(impl->key, NewKey());
  ASSIGN_OR_RETURN(impl->leaf_key, NewKey());
  std::string cn = "codebox box CA " + Excerpt(label.substr(0, 48));
  X509_NAME* subject = X509_NAME_new();
  if (subject == nullptr) return OpenSslError("X509_NAME_new");
  std::unique_ptr<X509_NAME, Free<X509_NAME, X509_NAME_free>> subject_owner(subject);
  RETURN_IF_ERROR(AddName(subject, NID_organizationName, "codebox"));
  RETURN_IF_ERROR(AddName(subject, NID_commonName, cn));
  ASSIGN_OR_RETURN(impl->cert, NewCertificate(impl->key.get(), subject));
  X509* cert = impl->cert.get();
  if (X509_set_issuer_name(cert, subject) != 1) return OpenSslError("certificate issuer");
  RETURN_IF_ERROR(AddExtension(cert, cert, NID_basic_constraints, "critical,CA:TRUE,pathlen:0"));
  RETURN_IF_ERROR(AddExtension(cert, cert, NID_key_usage, "critical,keyCertSign,cRLSign"));
  RETURN_IF_ERROR(AddExtension(cert, cert, NID_subject_key_identifier, "hash"));
  RETURN_IF_ERROR(AddExtension(cert, cert, NID_authority_key_identifier, "keyid:always"));
  if (X509_sign(cert, impl->key.get(), EVP_sha256()) == 0) {
    return OpenSslError("sign the box CA certificate");
  }
  impl->pem = ToPem(cert);
  if (impl->pem.empty()) return OpenSslError("box CA certificate as PEM");
  return std::shared_ptr<BoxCertificateAuthority>(new BoxCertificateAuthority(std::move(impl)));
}

const std::string& BoxCertificateAuthority::CertificatePem() const { return impl_->pem; }

StatusOr<std::shared_ptr<SSL_CTX>> BoxCertificateAuthority::ServerContextFor(
    const std::string& host) {
  std::string ip = IpBytes(host);
  std::string name = host;
  if (ip.empty()) {
    name = NormalizeName(host);
    bool valid = !name.empty() && name.size() <= 253 && name.front() != '.' &&
                 std::all_of(name.begin(), name.end(), [](char c) {
                   return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
                          c == '_' || c == '.';
                 });
    if (!valid)
      return InvalidArgument("no certificate for the host name \"" + Excerpt(host) + "\"");
  }
  std::lock_guard<std::mutex> lock(impl_->mutex);
  ERR_clear_error();
  if (auto it = impl_->contexts.find(name); it != impl_->contexts.end()) return it->second;
  ASSIGN_OR_RETURN(std::shared_ptr<SSL_CTX> ctx, impl_->ContextFor(name, ip));
  while (impl_->contexts.size() >= kMaxCachedHosts) {
    impl_->contexts.erase(impl_->order.front());
    impl_->order.pop_front();
  }
  impl_->contexts.emplace(name, ctx);
  impl_->order.push_back(name);
  return ctx;
}

StatusOr<std::shared_ptr<SSL_CTX>> MakeUpstreamContext(const UpstreamTrust& trust) {
  ERR_clear_error();
  std::shared_ptr<SSL_CTX> ctx = WrapContext(SSL_CTX_new(TLS_client_method()));
  if (!ctx) return OpenSslError("SSL_CTX_new");
  SSL_CTX* c = ctx.get();
  if (SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION) != 1) {
    return OpenSslError("upstream TLS context");
  }
  SSL_CTX_set_verify(c, SSL_VERIFY_PEER, nullptr);
  SSL_CTX_set_options(c, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION);
  static const unsigned char kAlpn[] = "\x08http/1.1";
  if (SSL_CTX_set_alpn_protos(c, kAlpn, sizeof kAlpn - 1) != 0) {  // 0 is success here
    return OpenSslError("upstream TLS context: ALPN");
  }
  if (trust.ca_file.empty()) {
    if (SSL_CTX_set_default_verify_paths(c) != 1) {
      return OpenSslError("upstream TLS context: the host's trust store");
    }
    return ctx;
  }
  struct stat st;
  if (::stat(trust.ca_file.c_str(), &st) != 0) {
    return InvalidArgument("upstream CA file " + trust.ca_file + ": " + strerror(errno));
  }
  if (SSL_CTX_load_verify_locations(c, trust.ca_file.c_str(), nullptr) != 1) {
    return InvalidArgument("upstream CA file " + trust.ca_file +
                           ": no PEM certificates loaded: " + OpenSslErrors());
  }
  return ctx;
}

StatusOr<std::unique_ptr<ByteStream>> AcceptBoxTls(int fd, const std::shared_ptr<SSL_CTX>& ctx,
                                                   const std::string& expected_host,
                                                   milliseconds timeout) {
  if (!ctx) return Internal("AcceptBoxTls: no TLS context");
  ASSIGN_OR_RETURN(Ssl ssl, NewSsl(ctx.get(), fd));
  SniCheck check{NormalizeName(expected_host), "", false};
  SSL_set_app_data(ssl.get(), &check);
  HandshakeResult r = Handshake(ssl.get(), fd, /*server=*/true, timeout);
  SSL_set_app_data(ssl.get(), nullptr);
  if (check.refused) {
    return PermissionDenied("the box's TLS asked for " + Excerpt(check.asked) +
                            " but its CONNECT named " + expected_host);
  }
  switch (r.end) {
    case HandshakeEnd::kDone:
      return std::unique_ptr<ByteStream>(new TlsStream(std::move(ssl), ctx, fd));
    case HandshakeEnd::kTimeout:
      return DeadlineExceeded("the box's TLS handshake for " + expected_host +
                              " did not finish within " + std::to_string(timeout.count()) + " ms");
    case HandshakeEnd::kClosed:
      return InvalidArgument("the box closed its connection to " + expected_host +
                             " during the TLS handshake");
    case HandshakeEnd::kFailed:
      break;
  }
  return InvalidArgument("the box's TLS handshake for " + expected_host + " failed: " + r.error);
}

StatusOr<std::unique_ptr<ByteStream>> ConnectUpstreamTls(int fd,
                                                         const std::shared_ptr<SSL_CTX>& ctx,
                                                         const std::string& host,
                                                         milliseconds timeout) {
  if (!ctx) return Internal("ConnectUpstreamTls: no TLS context");
  ASSIGN_OR_RETURN(Ssl ssl, NewSsl(ctx.get(), fd));
  std::string ip = IpBytes(host);
  if (ip.empty()) {
    std::string name = NormalizeName(host);
    if (SSL_set_tlsext_host_name(ssl.get(), name.c_str()) != 1 ||
        SSL_set1_host(ssl.get(), name.c_str()) != 1) {
      return InvalidArgument("upstream host name \"" + Excerpt(host) + "\": " + OpenSslErrors());
    }
    SSL_set_hostflags(ssl.get(), X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  } else {
    std::string text = host;
    if (text.size() > 2 && text.front() == '[') text = text.substr(1, text.size() - 2);
    if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl.get()), text.c_str()) != 1) {
      return InvalidArgument("upstream address " + Excerpt(host) + ": " + OpenSslErrors());
    }
  }
  HandshakeResult r = Handshake(ssl.get(), fd, /*server=*/false, timeout);
  if (r.end == HandshakeEnd::kDone) {
    return std::unique_ptr<ByteStream>(new TlsStream(std::move(ssl), ctx, fd));
  }
  long verify = SSL_get_verify_result(ssl.get());
  if (verify != X509_V_OK) {
    return Unavailable("the upstream " + host +
                       "'s certificate was not trusted: " + X509_verify_cert_error_string(verify));
  }
  switch (r.end) {
    case HandshakeEnd::kTimeout:
      return DeadlineExceeded("the TLS handshake with the upstream " + host +
                              " did not finish within " + std::to_string(timeout.count()) + " ms");
    case HandshakeEnd::kClosed:
      return Unavailable("the upstream " + host +
                         " closed the connection during the TLS handshake");
    default:
      return Unavailable("the TLS handshake with the upstream " + host + " failed: " + r.error);
  }
}

}  // namespace codebox::net
