// Where a codebox server listens or is reached: "unix:/path/to.sock", "http://127.0.0.1:8080",
// "127.0.0.1:8080", "[::1]:8080", "localhost:8080". One parser for `serve --listen`,
// `--server`, $CODEBOX_SERVER and BoxOptions::server.
#ifndef CODEBOX_HTTP_ADDRESS_H_
#define CODEBOX_HTTP_ADDRESS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "codebox/status.h"

namespace codebox::http {

struct Address {
  enum class Kind { kUnix, kTcp };
  Kind kind = Kind::kUnix;
  std::string path;  // kUnix: absolute
  std::string host;  // kTcp: a name or an IP literal (without brackets)
  uint16_t port = 0;

  std::string ToString() const;  // "unix:/run/codebox/codebox.sock", "127.0.0.1:8080"
  // kUnix, or kTcp whose host is "localhost" or a loopback IP literal.
  bool IsLoopback() const;
};

// Errors name the text and show the accepted forms.
StatusOr<Address> ParseAddress(std::string_view text);

// The default socket: /run/codebox/codebox.sock for root, else $XDG_RUNTIME_DIR/codebox.sock
// (or /tmp/codebox-<uid>/codebox.sock without XDG_RUNTIME_DIR).
std::string DefaultSocketPath();

}  // namespace codebox::http

#endif  // CODEBOX_HTTP_ADDRESS_H_
