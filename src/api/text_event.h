// A piece of a stream's output as JSON: the data of a `stdout` or `stderr` event (exec, python,
// run, attach). The text is the box's.
#ifndef CODEBOX_API_TEXT_EVENT_H_
#define CODEBOX_API_TEXT_EVENT_H_

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "codebox/status.h"

namespace codebox::api {

// {"text": "..."}.
nlohmann::json TextEventToJson(std::string_view text);
// `event` ("stdout") names it in errors.
StatusOr<std::string> TextEventFromJson(std::string_view data, std::string_view event);

}  // namespace codebox::api

#endif  // CODEBOX_API_TEXT_EVENT_H_
