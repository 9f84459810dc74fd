// One end of a connection the egress proxy relays, read and written without blocking: a plain
// socket, or TLS over one (net/tls_interception.h: the proxy's end of an intercepted box
// connection, or its own connection to the upstream). The relay polls fd() for what the last
// call wanted, so one loop serves both kinds.
//
//   auto r = stream->Read(buffer, sizeof buffer);
//   switch (r.io) { case Io::kDone: use r.bytes; case Io::kWantRead: poll POLLIN; ... }
#ifndef CODEBOX_NET_BYTE_STREAM_H_
#define CODEBOX_NET_BYTE_STREAM_H_

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

namespace codebox::net {

class ByteStream {
 public:
  enum class Io {
    kDone,       // `bytes` were read or written (more than 0)
    kWantRead,   // nothing now: poll fd() for POLLIN, then call again
    kWantWrite,  // nothing now: poll fd() for POLLOUT, then call again (TLS may need to write
                 // to read)
    kEof,        // the peer ended its sending (Read only)
    kError,      // the connection failed; `error` says how
  };
  struct Result {
    Io io = Io::kError;
    size_t bytes = 0;
    std::string error;
  };

  virtual ~ByteStream() = default;
  virtual int fd() const = 0;
  virtual Result Read(char* buffer, size_t size) = 0;
  // Writes some of `data`; after a kWant*, the next call must pass the same bytes again.
  virtual Result Write(const char* data, size_t size) = 0;
  // Bytes already taken from fd() and held inside (TLS records): Read returns them without a
  // poll, which would not see them.
  virtual bool HasBuffered() const { return false; }
  // Nothing more will be written: a FIN, after a TLS close_notify.
  virtual void ShutdownWrite() = 0;
};

// poll() for `events` on `fd` until `deadline`: >0 ready, 0 past the deadline, <0 an error.
int PollFor(int fd, short events, std::chrono::steady_clock::time_point deadline);

// A plain stream socket; `fd` stays the caller's (not closed here).
std::unique_ptr<ByteStream> SocketStream(int fd);

}  // namespace codebox::net

#endif  // CODEBOX_NET_BYTE_STREAM_H_
