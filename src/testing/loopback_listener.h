// A TCP listener on the host's 127.0.0.1 at an ephemeral port: the target a box's code must
// not be able to reach (the box's 127.0.0.1 is its own).
#ifndef CODEBOX_TESTING_LOOPBACK_LISTENER_H_
#define CODEBOX_TESTING_LOOPBACK_LISTENER_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "base/io.h"
#include "base/unique_fd.h"
#include "codebox/status.h"

namespace codebox::testing {

struct LoopbackListener {
  base::UniqueFd fd;
  int port = 0;
};

inline StatusOr<LoopbackListener> ListenOnLoopback() {
  LoopbackListener l;
  l.fd.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!l.fd.valid()) return base::ErrnoStatus("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(l.fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return base::ErrnoStatus("bind 127.0.0.1");
  }
  if (::listen(l.fd.get(), 4) != 0) return base::ErrnoStatus("listen");
  socklen_t len = sizeof addr;
  if (::getsockname(l.fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return base::ErrnoStatus("getsockname");
  }
  l.port = ntohs(addr.sin_port);
  return l;
}

}  // namespace codebox::testing

#endif  // CODEBOX_TESTING_LOOPBACK_LISTENER_H_
