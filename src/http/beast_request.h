// The Request for a message Beast's parser read: shared by the server's connections
// (connection.cc) and the request fuzzer (src/server/api_fuzz.cc), so that both hand a handler
// exactly what a client's bytes make.
#ifndef CODEBOX_HTTP_BEAST_REQUEST_H_
#define CODEBOX_HTTP_BEAST_REQUEST_H_

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <string>
#include <vector>

#include "codebox/status.h"
#include "http/server.h"

namespace codebox::http {

using BeastRequest = boost::beast::http::request<boost::beast::http::string_body>;

// Fills `request` from `message` (its body moved out): method, target, headers with lower-cased
// names (a repeated header's values joined with ", "), body, path and query (SplitTarget) and,
// when `tokens` is not empty, token (MatchBearerToken). Leaves peer and request_id alone. A
// target SplitTarget refuses is kInvalidArgument, which the server answers with 400.
Status BuildRequest(BeastRequest&& message, const std::vector<std::string>& tokens,
                    Request* request);

}  // namespace codebox::http

#endif  // CODEBOX_HTTP_BEAST_REQUEST_H_
