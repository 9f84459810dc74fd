// FieldReader: base::JsonFields (the one checked field reader) as every decoder in
// messages.cc uses it: a message's "op" or "event", read by its dispatcher, counts as read,
// so CheckNoUnknown reports only fields no decoder asked for.
#ifndef CODEBOX_PROTOCOL_FIELD_READER_H_
#define CODEBOX_PROTOCOL_FIELD_READER_H_

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "base/json_fields.h"
#include "protocol/message.h"

namespace codebox::protocol::msg {

inline constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

class FieldReader : public base::JsonFields {
 public:
  // An object inside a message (`nested`) has no "op" or "event" of its own.
  FieldReader(const Json& message, std::string_view what, bool nested = false)
      : JsonFields(message, std::string(what)) {
    if (nested) return;
    MarkRead("op");
    MarkRead("event");
  }
};

}  // namespace codebox::protocol::msg

#endif  // CODEBOX_PROTOCOL_FIELD_READER_H_
