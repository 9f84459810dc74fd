// The MCP sessions of `codebox serve`'s Streamable HTTP transport (api_mcp.cc, docs/mcp.md):
// each is an mcp::Session known by an unguessable id, whose one box comes from the
// BoxRegistry with the server's default options (so it counts against --max-boxes and shows
// in /v1/boxes). A session ends on DELETE /mcp, when no request has used it for the idle
// timeout, or when the server stops; its box is destroyed then, even while a tool call runs
// in it (that call fails cleanly). Thread-safe.
#ifndef CODEBOX_SERVER_MCP_SESSIONS_H_
#define CODEBOX_SERVER_MCP_SESSIONS_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "codebox/options.h"
#include "codebox/status.h"
#include "mcp/session.h"
#include "server/box_registry.h"

namespace codebox::server {

struct McpSessionsOptions {
  BoxOptions box_options;  // the server's defaults (ApiOptions::defaults)
  uint32_t max_sessions = 256;
  // A session no request used for this long is ended (kNoTimeout: never).
  std::chrono::milliseconds idle_timeout{std::chrono::minutes(10)};
  mcp::SessionOptions session;
  // Session ids end in ".<node>" (scale-out): any replica forwards a session's requests to
  // the node that holds it. Empty: ids without a node.
  std::string node;
};

class McpSessions {
 public:
  McpSessions(McpSessionsOptions options, BoxRegistry* registry);
  ~McpSessions();  // ends every session
  McpSessions(const McpSessions&) = delete;
  McpSessions& operator=(const McpSessions&) = delete;

  struct Entry;
  // A session held for one request: it is not idle-ended while a Use of it lives.
  class Use {
   public:
    Use(std::shared_ptr<Entry> entry);
    Use(Use&&) = default;
    ~Use();
    mcp::Session& session() const;
    const std::string& id() const;

   private:
    friend class McpSessions;
    std::shared_ptr<Entry> entry_;
  };

  // A new session of `owner`'s tenant with a fresh id, held by the Use; its boxes count in
  // that tenant's quota. kResourceExhausted at max_sessions. It is found by Find only after
  // Keep (the initialize that made it succeeded); End it otherwise.
  StatusOr<Use> Open(const BoxOwner& owner = {});
  void Keep(const Use& use);
  // kNotFound when the id is unknown, ended, not kept, or another tenant's (the same answer:
  // a tenant cannot tell another's session from none).
  StatusOr<Use> Find(std::string_view id, const Caller& caller = Caller::System());
  // Ends the session now (its box destroyed); kNotFound when unknown or another tenant's.
  Status End(std::string_view id, const Caller& caller = Caller::System());
  size_t size() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace codebox::server

#endif  // CODEBOX_SERVER_MCP_SESSIONS_H_
