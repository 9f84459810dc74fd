// The record of one connection a box made through its egress proxy: public vocabulary shared by
// Box (BoxInfo's egress log) and the host's relay (src/net), which never needs all of box.h.
#ifndef CODEBOX_EGRESS_H_
#define CODEBOX_EGRESS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace codebox {

// One connection a box opened through its egress proxy (docs/security.md, "Network"), allowed
// or refused: the box's audit trail.
struct EgressRecord {
  std::string host;  // as the box asked for it ("" when its request was not understood)
  uint16_t port = 0;
  bool allowed = false;
  std::string reason;                     // why allowed or refused, or how the relay ended
  std::string address;                    // the address connected to ("" when none)
  uint64_t bytes_up = 0;                  // box -> upstream
  uint64_t bytes_down = 0;                // upstream -> box
  std::vector<std::string> secrets = {};  // names of the secrets put into its request
  // Set when the box must hear of it (NetworkEvent::rule): refused, failed or cut. Empty for
  // a connection that ran and ended as its ends wanted.
  std::string rule = {};
};

// A connection of the box's that was refused, failed or was cut, told so that its code and
// a model can act on it: returned with the exec, run or cell during which it ended
// (ExecResult::network_events, Execution::network_events), and in the proxy's answer to the
// box's client.
struct NetworkEvent {
  std::string host;  // as the box asked for it
  uint16_t port = 0;
  // not_allowed (not in the box's allowlist), internal_address (the name resolved to one),
  // resolve (the name did not resolve), connect (no connection), budget (the box's byte
  // budget is used up), secret_elsewhere (a secret's placeholder bound for a host it is not
  // for), request (not a proxy request), tls (the box's TLS on an intercepted connection),
  // upstream_tls (the upstream's certificate is not trusted).
  std::string rule;
  std::string message;  // what happened, in the proxy's words
  std::string hint;     // what to do about it
};

}  // namespace codebox

#endif  // CODEBOX_EGRESS_H_
