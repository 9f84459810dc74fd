// A resolver for DNS-rebinding tests: every name it knows answers with the host's loopback and
// a private address, the answers an allowed name must never get a box to.
#ifndef CODEBOX_TESTING_REBINDING_RESOLVER_H_
#define CODEBOX_TESTING_REBINDING_RESOLVER_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <string>
#include <vector>

#include "net/egress_relay.h"

namespace codebox::testing {

// 127.0.0.1 and 10.1.2.3 for `only_name`, or for any name when it is empty; other names are
// not found.
inline net::Resolver RebindingResolver(std::string only_name = {}) {
  return [only_name](const std::string& host, uint16_t) -> StatusOr<std::vector<sockaddr_storage>> {
    if (!only_name.empty() && host != only_name) {
      return NotFound(host + ": not a name of this test");
    }
    std::vector<sockaddr_storage> out(2);
    auto* a = reinterpret_cast<sockaddr_in*>(&out[0]);
    a->sin_family = AF_INET;
    inet_pton(AF_INET, "127.0.0.1", &a->sin_addr);
    auto* b = reinterpret_cast<sockaddr_in*>(&out[1]);
    b->sin_family = AF_INET;
    inet_pton(AF_INET, "10.1.2.3", &b->sin_addr);
    return out;
  };
}

}  // namespace codebox::testing

#endif  // CODEBOX_TESTING_REBINDING_RESOLVER_H_
