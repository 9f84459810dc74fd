// The flags of the commands that talk to a codebox server by hand (status, ps, attach, kill,
// start): --server ADDR and --token-file F, with $CODEBOX_SERVER / $CODEBOX_TOKEN and the
// default socket behind them.
#ifndef CODEBOX_CLI_SERVER_FLAGS_H_
#define CODEBOX_CLI_SERVER_FLAGS_H_

#include <string>
#include <vector>

#include "codebox/status.h"
#include "remote/server_api.h"

namespace codebox::cli {

struct ServerFlags {
  std::string server;      // "": $CODEBOX_SERVER, else the default socket
  std::string token_file;  // "": $CODEBOX_TOKEN

  // Takes args[*i] (and its value) when it is one of the two flags; false otherwise.
  bool Take(const std::vector<std::string>& args, size_t* i);
  // The server they name, with its token; errors are usage errors.
  StatusOr<remote::ServerApi> Open() const;
};

// The first token line of a token file (docs/server.md, Tenants).
StatusOr<std::string> FirstToken(const std::string& path);

// The help text's lines for the two flags.
inline constexpr const char kServerFlagsHelp[] =
    R"(  --server ADDR    the server: unix:PATH or http://HOST:PORT (default
                   $CODEBOX_SERVER, else the default socket)
  --token-file F   the bearer token: the first token line of F (default
                   $CODEBOX_TOKEN)
)";

}  // namespace codebox::cli

#endif  // CODEBOX_CLI_SERVER_FLAGS_H_
