// The Request for a message Beast's parser read: shared by the server's connections
// (connection.cc) and the request fuzzer (src/server/api_fuzz.cc), so that both hand a handler
// exactly what a client's bytes make.
#ifndef CODEBOX_HTTP_BEAST_REQUEST_H_
#define CODEBOX_HTTP_BEAST_REQUEST_H_

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "codebox/status.h"
#include "http/server.h"

namespace codebox::http {

using BeastRequest = boost::beast::http::request<boost::beast::http::string_body>;
using BeastParser = boost::beast::http::request_parser<boost::beast::http::string_body>;

// Bytes of one chunk's extensions a request may send (RFC 9112 7.1.1: they are bounded).
inline constexpr size_t kMaxChunkExtension = 1024;

// Sets a new parser's limits as a server connection reads one request with them: at most
// `max_header_bytes` of head (error header_limit: 431), `max_body_bytes` of body (body_limit:
// 413), kMaxChunkExtension bytes of extensions per chunk (bad_chunk_extension: 400).
void LimitParser(BeastParser& parser, uint64_t max_header_bytes, uint64_t max_body_bytes);

// Once the head is read: RFC 9112 6.3, a request whose Transfer-Encoding does not end in chunked
// has no length the server can know, and its bytes must not be read as a next request. Such a
// head is kInvalidArgument, which the server answers with 400 before closing the connection.
Status CheckFraming(const BeastParser& parser);

// Fills `request` from `message` (its body moved out): method, target, headers with lower-cased
// names (a repeated header's values joined with ", "), body, path and query (SplitTarget) and,
// when `tokens` is not empty, token (MatchBearerToken). Leaves peer and request_id alone. A
// target SplitTarget refuses is kInvalidArgument, which the server answers with 400.
Status BuildRequest(BeastRequest&& message, const std::vector<std::string>& tokens,
                    Request* request);

}  // namespace codebox::http

#endif  // CODEBOX_HTTP_BEAST_REQUEST_H_
