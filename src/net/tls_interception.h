// The TLS building blocks of secret injection (the egress proxy terminates a box's HTTPS to a
// secret's hosts): a per-box certificate authority whose key stays in this process, the server
// contexts that present its leaf certificates to the box, the client context for the proxy's own
// verified connection upstream, and both handshakes over a non-blocking socket, each bounded by
// a deadline, ending in a ByteStream the relay reads and writes.
//
//   ASSIGN_OR_RETURN(auto ca, BoxCertificateAuthority::Create(box_id));   // ca->CertificatePem()
//   ASSIGN_OR_RETURN(auto server_ctx, ca->ServerContextFor(host));         // into the box
//   ASSIGN_OR_RETURN(auto box, AcceptBoxTls(box_fd, server_ctx, host, 10s));
//   ASSIGN_OR_RETURN(auto client_ctx, MakeUpstreamContext({}));           // once per proxy
//   ASSIGN_OR_RETURN(auto up, ConnectUpstreamTls(upstream_fd, client_ctx, host, 10s));
#ifndef CODEBOX_NET_TLS_INTERCEPTION_H_
#define CODEBOX_NET_TLS_INTERCEPTION_H_

#include <openssl/ssl.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "codebox/status.h"
#include "net/byte_stream.h"

namespace codebox::net {

// A box's own certificate authority: an EC P-256 key made in memory on the host (never written
// to disk, never sent into the box) and its self-signed certificate, which the box is told to
// trust. Thread-safe.
class BoxCertificateAuthority {
 public:
  // `label` goes into the subject CN ("codebox box CA <label>"); characters outside printable
  // ASCII become '?', and it is cut to 48 bytes.
  static StatusOr<std::shared_ptr<BoxCertificateAuthority>> Create(std::string_view label);
  ~BoxCertificateAuthority();
  BoxCertificateAuthority(const BoxCertificateAuthority&) = delete;
  BoxCertificateAuthority& operator=(const BoxCertificateAuthority&) = delete;

  const std::string& CertificatePem() const;

  // The server context for the box's end of an intercepted connection to `host` (a host name
  // or an IP literal; the name is lowercased, a trailing dot dropped; anything but letters,
  // digits, '-', '_' and '.' is InvalidArgument): TLS 1.2+, ALPN "http/1.1" or none, and a leaf
  // certificate for `host` signed by this CA. Cached per host (256 at most).
  StatusOr<std::shared_ptr<SSL_CTX>> ServerContextFor(const std::string& host);

 private:
  struct Impl;
  explicit BoxCertificateAuthority(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// How the proxy checks an upstream's certificate.
struct UpstreamTrust {
  std::string ca_file;  // PEM file of trust anchors; empty: the host's default store
};

// A client context: TLS 1.2+, peer verification against `trust`, ALPN "http/1.1" only. An
// error names the file when it cannot be loaded.
StatusOr<std::shared_ptr<SSL_CTX>> MakeUpstreamContext(const UpstreamTrust& trust);

// The box side of an intercepted connection: the handshake as a server on the non-blocking
// socket `fd` (the caller's; never closed here) within `timeout`. The box's SNI, when sent, must
// name `expected_host` (case-insensitive, a trailing dot ignored): else PermissionDenied "the
// box's TLS asked for <sni> but its CONNECT named <host>". Not TLS, or closed: InvalidArgument;
// silence: DeadlineExceeded. The stream keeps `ctx` alive.
StatusOr<std::unique_ptr<ByteStream>> AcceptBoxTls(int fd, const std::shared_ptr<SSL_CTX>& ctx,
                                                   const std::string& expected_host,
                                                   std::chrono::milliseconds timeout);

// The upstream side: the handshake as a client on `fd` within `timeout`, with SNI `host` (none
// for an IP literal) and the certificate verified against the context's anchors and `host`.
// An untrusted certificate is Unavailable "the upstream <host>'s certificate was not trusted:
// <why>"; other failures are Unavailable too, silence DeadlineExceeded.
StatusOr<std::unique_ptr<ByteStream>> ConnectUpstreamTls(int fd,
                                                         const std::shared_ptr<SSL_CTX>& ctx,
                                                         const std::string& host,
                                                         std::chrono::milliseconds timeout);

}  // namespace codebox::net

#endif  // CODEBOX_NET_TLS_INTERCEPTION_H_
