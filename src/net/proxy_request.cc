#include "net/proxy_request.h"

#include <boost/beast/http.hpp>
#include <sstream>

#include "base/text.h"
#include "net/egress_policy.h"

namespace codebox::net {
namespace {

namespace http = boost::beast::http;

// "host:port" of a CONNECT, or a URI's authority (default port 80).
StatusOr<HostPort> Authority(std::string_view text, std::optional<uint16_t> default_port) {
  if (text.find('@') != std::string_view::npos) {
    return InvalidArgument("credentials in the URI ('user@host') are not passed on");
  }
  ASSIGN_OR_RETURN(HostPort split, SplitHostPort(text));
  if (split.host.empty()) return InvalidArgument("the request names no host");
  if (split.host.front() == '[') split.host = split.host.substr(1, split.host.size() - 2);
  if (!split.port) split.port = default_port;
  if (!split.port) {
    return InvalidArgument("CONNECT " + std::string(text.substr(0, 300)) +
                           " names no port (CONNECT host:port)");
  }
  return split;
}

// Feeds `bytes` to the parser: the bytes the head took, or 0 while it is not complete.
StatusOr<size_t> ParseHead(http::request_parser<http::empty_body>& parser, std::string_view bytes,
                           size_t max_head_bytes) {
  parser.header_limit(static_cast<uint32_t>(std::min<size_t>(max_head_bytes, UINT32_MAX)));
  parser.eager(false);
  boost::beast::error_code ec;
  const size_t used = parser.put(boost::asio::buffer(bytes.data(), bytes.size()), ec);
  if (ec == http::error::header_limit ||
      (ec == http::error::need_more && bytes.size() > max_head_bytes)) {
    return ResourceExhausted("the request head is longer than " + std::to_string(max_head_bytes) +
                             " bytes");
  }
  if (ec == http::error::need_more || (!ec && !parser.is_header_done())) return size_t{0};
  if (ec) return InvalidArgument("not an HTTP request (" + ec.message() + ")");
  return used;
}

// The head to send upstream: origin form, Host the authority the proxy connects to (never the
// box's own Host: a shared front would route by it), no Proxy-* headers, one request only.
std::string UpstreamHead(http::request<http::empty_body>& request, const std::string& path,
                         std::string_view authority) {
  request.target(path);
  request.erase(http::field::proxy_authorization);
  request.erase(http::field::proxy_connection);
  request.erase(http::field::connection);
  request.erase(http::field::keep_alive);
  request.set(http::field::host, std::string(authority));
  request.set(http::field::connection, "close");
  std::ostringstream head;
  head << request.base();
  return head.str();
}

}  // namespace

StatusOr<std::optional<ProxyRequest>> ParseProxyRequest(std::string_view bytes,
                                                        size_t max_head_bytes) {
  http::request_parser<http::empty_body> parser;
  ASSIGN_OR_RETURN(const size_t used, ParseHead(parser, bytes, max_head_bytes));
  if (used == 0) return std::optional<ProxyRequest>();
  http::request<http::empty_body>& request = parser.get();
  const std::string_view target(request.target().data(), request.target().size());
  ProxyRequest out;
  out.head_bytes = used;
  if (request.method() == http::verb::connect) {
    ASSIGN_OR_RETURN(HostPort where, Authority(target, std::nullopt));
    out.tunnel = true;
    out.host = where.host;
    out.port = *where.port;
    return std::optional<ProxyRequest>(std::move(out));
  }
  const std::string lowered = base::AsciiLower(target.substr(0, 8));
  if (lowered.rfind("https://", 0) == 0) {
    return InvalidArgument(
        "https:// URIs go through CONNECT (set HTTPS_PROXY), not as a plain "
        "request to the proxy");
  }
  if (lowered.rfind("http://", 0) != 0) {
    return InvalidArgument(
        "this is a proxy: send the whole URI (GET http://host/path), or "
        "CONNECT host:port");
  }
  std::string_view rest = target.substr(7);
  const size_t path_at = rest.find_first_of("/?#");
  // Copies: `target` points into the request, which is rewritten below.
  const std::string authority(rest.substr(0, path_at));
  std::string path = path_at == std::string_view::npos ? "/" : std::string(rest.substr(path_at));
  if (const size_t hash = path.find('#'); hash != std::string::npos) path.resize(hash);
  if (path.empty() || path.front() != '/') path.insert(0, "/");
  ASSIGN_OR_RETURN(HostPort where, Authority(authority, uint16_t{80}));
  out.host = where.host;
  out.port = *where.port;

  out.upstream_head = UpstreamHead(request, path, authority);
  return std::optional<ProxyRequest>(std::move(out));
}

StatusOr<std::optional<ProxyRequest>> ParseOriginRequest(std::string_view bytes,
                                                         size_t max_head_bytes,
                                                         std::string_view authority) {
  http::request_parser<http::empty_body> parser;
  ASSIGN_OR_RETURN(const size_t used, ParseHead(parser, bytes, max_head_bytes));
  if (used == 0) return std::optional<ProxyRequest>();
  http::request<http::empty_body>& request = parser.get();
  const std::string path(request.target().data(), request.target().size());
  if (request.method() == http::verb::connect || path.empty() || path.front() != '/') {
    return InvalidArgument(
        "inside an intercepted connection, send origin-form requests "
        "(GET /path HTTP/1.1), one at a time");
  }
  ProxyRequest out;
  out.head_bytes = used;
  out.upstream_head = UpstreamHead(request, path, authority);
  return std::optional<ProxyRequest>(std::move(out));
}

std::string ProxyRefusal(int status, std::string_view why) {
  const char* reason = status == 403   ? "Forbidden"
                       : status == 400 ? "Bad Request"
                       : status == 431 ? "Request Header Fields Too Large"
                       : status == 502 ? "Bad Gateway"
                       : status == 504 ? "Gateway Timeout"
                                       : "Error";
  std::string body = "codebox egress proxy: " + base::TerminalSafe(why, 4096) + "\n";
  return "HTTP/1.1 " + std::to_string(status) + " " + reason +
         "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

}  // namespace codebox::net
