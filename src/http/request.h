// The server's request checks that need no socket: the target split into a decoded path and
// query, the bearer-token check, and the API's error bodies.
#ifndef CODEBOX_HTTP_REQUEST_H_
#define CODEBOX_HTTP_REQUEST_H_

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "codebox/status.h"

namespace codebox::http {

// Percent-decodes `text`; '+' becomes a space when `plus_is_space` (query strings). An invalid
// escape or a decoded NUL is kInvalidArgument.
StatusOr<std::string> PercentDecode(std::string_view text, bool plus_is_space);

// Splits a request target ("/a%20b?x=1&y") into a decoded path and query (a key without '='
// maps to ""); the path must start with '/'.
Status SplitTarget(std::string_view target, std::string* path,
                   std::map<std::string, std::string>* query);

// Whether `authorization` is "Bearer <t>" with t equal to one of `tokens`. Every token is
// compared in full whatever matched before, without early exit on the first differing byte, so
// the time taken says nothing about which bytes or which token matched.
bool BearerTokenMatches(std::string_view authorization, const std::vector<std::string>& tokens);
// The same comparison, answering the index in `tokens` of the one that matched, or -1.
int MatchBearerToken(std::string_view authorization, const std::vector<std::string>& tokens);
// The same comparison of a token given bare (X-API-KEY: <t>); -1 for "".
int MatchToken(std::string_view given, const std::vector<std::string>& tokens);
// <t> of "Bearer <t>" (the scheme in any case), or "" when `authorization` is not one.
std::string_view BearerToken(std::string_view authorization);

}  // namespace codebox::http

#endif  // CODEBOX_HTTP_REQUEST_H_
