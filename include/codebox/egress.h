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
};

}  // namespace codebox

#endif  // CODEBOX_EGRESS_H_
