// The request a box sends to its egress proxy (docs/security.md, "Network"), read by the host:
// CONNECT host:port for TLS (HTTPS_PROXY), or a plain-HTTP request with an absolute URI
// (HTTP_PROXY). The head is parsed by Boost.Beast, bounded, and everything in it is box text:
// the target goes to EgressPolicy::CheckName before anything is resolved or connected.
//
//   auto parsed = net::ParseProxyRequest(bytes_so_far, 8 << 10);
//   if (!parsed.ok()) send(net::ProxyRefusal(400, parsed.status().message()));
//   else if (!*parsed) read more;
//   else check (*parsed)->host / port, connect, then relay (tunnel) or send upstream_head.
#ifndef CODEBOX_NET_PROXY_REQUEST_H_
#define CODEBOX_NET_PROXY_REQUEST_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "codebox/status.h"

namespace codebox::net {

struct ProxyRequest {
  bool tunnel = false;  // CONNECT: answer 200, then relay bytes both ways
  std::string host;     // as the box wrote it (IPv6 without brackets)
  uint16_t port = 0;
  // Plain HTTP: the head to send upstream, in origin form ("GET /path HTTP/1.1"), its Host
  // set to the URI's authority, Proxy-* headers dropped and "Connection: close". Empty for
  // CONNECT.
  std::string upstream_head;
  size_t head_bytes = 0;  // bytes of the input the head took; a body follows as sent
};

// nullopt: the head is not complete yet (read more, up to max_head_bytes). An error
// (kInvalidArgument) says what is wrong, for a 400 answer to the box; a head over
// max_head_bytes is kResourceExhausted (431).
StatusOr<std::optional<ProxyRequest>> ParseProxyRequest(std::string_view bytes,
                                                        size_t max_head_bytes);

// A request read inside a connection the proxy intercepts (a secret's host, over TLS): origin
// form ("GET /path HTTP/1.1"), sent upstream as ParseProxyRequest's plain-HTTP head with Host
// set to `authority`, the host the connection was made to. As ParseProxyRequest otherwise.
StatusOr<std::optional<ProxyRequest>> ParseOriginRequest(std::string_view bytes,
                                                         size_t max_head_bytes,
                                                         std::string_view authority);

// The whole answer the proxy sends when it refuses: "HTTP/1.1 <status> <reason>", a
// plain-text body with `why` (made terminal-safe), Connection: close.
std::string ProxyRefusal(int status, std::string_view why);

}  // namespace codebox::net

#endif  // CODEBOX_NET_PROXY_REQUEST_H_
