// An error as JSON: the body of an `error` event in a stream (exec, run_code, attach, ask, a
// forwarded stream that broke), in the shape of the API's error answers. The message may quote
// a box or a client, so a client makes it terminal-safe.
#ifndef CODEBOX_API_ERROR_H_
#define CODEBOX_API_ERROR_H_

#include <nlohmann/json.hpp>
#include <string_view>

#include "codebox/status.h"

namespace codebox::api {

// {"error": {"code": "<StatusCodeName>", "message": "..."}}.
nlohmann::json ErrorToJson(const Status& status);
// An `error` event's data as the Status it names, its message "server: ..." (a code this
// client does not know: kInternal, the code in front of the message); data that is not that
// shape is kProtocolError.
Status ErrorEventFromJson(std::string_view data);

}  // namespace codebox::api

#endif  // CODEBOX_API_ERROR_H_
