// One Model Context Protocol session (docs/mcp.md): JSON-RPC 2.0 messages in, the answers out,
// and the one box the session's tools run in. Both transports sit on it: `codebox mcp` (stdio,
// src/mcp/stdio.cc) and Streamable HTTP at /mcp of `codebox serve` (src/server/api_mcp.cc).
//
//   mcp::Session session(options, mcp::LocalBoxSource(box_options));
//   auto parsed = mcp::ParseMessage(line);            // -32700 answer on bad JSON
//   if (!parsed.message) Send(*parsed.error_answer);
//   else if (auto answer = session.Handle(*parsed.message)) Send(*answer);
//
// The protocol: the initialize handshake (protocol version negotiated from
// kSupportedProtocolVersions, capabilities {tools}), ping, tools/list, tools/call, and the
// notifications notifications/initialized and notifications/cancelled (which interrupts the
// call it names). Tools: run_python, run_command, write_file, read_file, list_files, reset.
// Bad requests get JSON-RPC errors (-32700 parse, -32600 invalid request, -32601 unknown
// method, -32602 invalid params or unknown tool); a tool that ran and failed (an exception, a
// non-zero exit, a missing file) is a result with isError: true, as the spec asks. Arguments
// that do not fit a tool's inputSchema are -32602 before revision 2025-11-25 and a result with
// isError from it on (SEP-1303: the model sees what to correct).
//
// The box is made on the first tool call that needs it (so `initialize` and `tools/list` are
// instant), replaced by `reset`, and closed when the Session is destroyed. Everything that
// comes out of it is hostile: each text is capped (SessionOptions), images are checked PNGs.
//
// Thread safety: Handle may be called from several threads at once (a transport reads the
// next message while a tool runs, so that notifications/cancelled can interrupt it); tool
// calls on the box are serialized.
#ifndef CODEBOX_MCP_SESSION_H_
#define CODEBOX_MCP_SESSION_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "codebox/box.h"
#include "codebox/options.h"
#include "codebox/status.h"

namespace codebox::mcp {

// Newest first; the first is answered when the client asks for one we do not know.
inline constexpr const char* kSupportedProtocolVersions[] = {"2025-11-25", "2025-06-18",
                                                              "2025-03-26", "2024-11-05"};

// Where a session's boxes come from: `codebox mcp` makes them with Box::Create
// (LocalBoxSource); `codebox serve` registers them in its BoxRegistry, so that they count
// against --max-boxes and show in /v1/boxes and /metrics.
class BoxSource {
 public:
  virtual ~BoxSource() = default;
  // A fresh box, for the first tool call and after reset.
  virtual StatusOr<std::shared_ptr<Box>> Open() = 0;
  // The session is done with `box` (reset, or the session ended): destroy it.
  virtual void Close(std::shared_ptr<Box> box) = 0;
};

std::unique_ptr<BoxSource> LocalBoxSource(BoxOptions options);

struct SessionOptions {
  std::string server_name = "codebox";
  std::string server_version = "0.1.0";
  // A tool's `timeout` (seconds) is capped to max_timeout; without one, the box's
  // exec_timeout applies.
  std::chrono::milliseconds max_timeout{std::chrono::minutes(10)};
  uint64_t max_text_bytes = 64 << 10;    // per stdout / stderr / file text in a result
  uint64_t max_read_bytes = 1 << 20;     // read_file refuses larger files (says so)
  uint64_t max_image_bytes = 4 << 20;    // per image; larger ones are left out with a note
  uint32_t max_images = 8;               // per result
  uint32_t max_list_entries = 1000;      // list_files
};

// One message's text, parsed. Exactly one of the two is set: the message, or the -32700
// (or -32600 for a batch or a non-object) error answer to send back with id null.
struct ParsedMessage {
  std::optional<nlohmann::json> message;
  std::optional<nlohmann::json> error_answer;
};
ParsedMessage ParseMessage(std::string_view text);

// Whether `message` is a request for `method` ("initialize"): a transport that makes a
// session per initialize needs to know before it has one.
bool IsRequest(const nlohmann::json& message, std::string_view method);

class Session {
 public:
  Session(SessionOptions options, std::unique_ptr<BoxSource> boxes);
  ~Session();  // closes the box, if one was made
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // One message in; the answer to send, or nullopt when none is due (a notification, or a
  // response from the client). Never throws.
  std::optional<nlohmann::json> Handle(const nlohmann::json& message);

  bool initialized() const;               // after a successful initialize
  std::string protocol_version() const;   // negotiated; "" before initialize

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace codebox::mcp

#endif  // CODEBOX_MCP_SESSION_H_
