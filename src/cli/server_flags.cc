#include "cli/server_flags.h"

#include <cstdlib>
#include <fstream>

#include "http/address.h"

namespace codebox::cli {

StatusOr<std::string> FirstToken(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("--token-file " + path + ": cannot be read");
  for (std::string line; std::getline(in, line);) {
    size_t b = line.find_first_not_of(" \t\r");
    size_t e = line.find_last_not_of(" \t\r");
    if (b != std::string::npos && line[b] != '#') return line.substr(b, e - b + 1);
  }
  return InvalidArgument("--token-file " + path + " holds no token");
}

bool ServerFlags::Take(const std::vector<std::string>& args, size_t* i) {
  const std::string& a = args[*i];
  if ((a == "--server" || a == "--token-file") && *i + 1 < args.size()) {
    (a == "--server" ? server : token_file) = args[++*i];
  } else if (a.rfind("--server=", 0) == 0) {
    server = a.substr(9);
  } else if (a.rfind("--token-file=", 0) == 0) {
    token_file = a.substr(13);
  } else {
    return false;
  }
  return true;
}

StatusOr<remote::ServerApi> ServerFlags::Open() const {
  std::string address = server;
  if (address.empty()) {
    const char* env = std::getenv("CODEBOX_SERVER");
    address = env != nullptr && *env != '\0' ? env : "unix:" + http::DefaultSocketPath();
  }
  std::string token;
  if (!token_file.empty()) {
    ASSIGN_OR_RETURN(token, FirstToken(token_file));
  } else if (const char* env = std::getenv("CODEBOX_TOKEN"); env != nullptr) {
    token = env;
  }
  auto api = remote::ServerApi::Open(address, token);
  if (!api.ok()) return InvalidArgument("--server " + address + ": " + api.status().message());
  return api;
}

}  // namespace codebox::cli
