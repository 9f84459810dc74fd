#include "api/text_event.h"

#include "base/json_fields.h"

namespace codebox::api {

using nlohmann::json;

json TextEventToJson(std::string_view text) { return {{"text", std::string(text)}}; }

StatusOr<std::string> TextEventFromJson(std::string_view data, std::string_view event) {
  std::string what = "the server's " + std::string(event) + " event";
  ASSIGN_OR_RETURN(json j, base::ParseJsonObject(data, what));
  return base::JsonFields(j, what).String("text");
}

}  // namespace codebox::api
