#include "remote/server_choice.h"

#include <sys/stat.h>

#include <cstdlib>

#include "base/log.h"
#include "http/address.h"
#include "http/client.h"

namespace codebox::remote {
namespace {

// The default socket is on this host: a server there answers /healthz in well under this.
constexpr std::chrono::milliseconds kProbeTimeout{1'000};

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

}  // namespace

bool ServerAnswers(const std::string& address, std::chrono::milliseconds timeout) {
  auto parsed = http::ParseAddress(address);
  if (!parsed.ok()) return false;
  http::ClientOptions options;
  options.connect_timeout = timeout;
  options.max_response_bytes = 64 << 10;
  http::ClientRequest request;
  request.target = "/healthz";
  request.timeout = timeout;
  auto response = http::Client(*parsed, options).Send(request);
  if (!response.ok()) {
    CODEBOX_LOG(kDebug, "no codebox server answers on " << address << " ("
                                                        << response.status().message()
                                                        << "); running boxes in this process");
    return false;
  }
  if (response->status != 200) {
    CODEBOX_LOG(kDebug, "what answers on " << address << " is not a healthy codebox server (HTTP "
                                           << response->status
                                           << "); running boxes in this process");
    return false;
  }
  return true;
}

Status ChooseServer(BoxOptions* options, bool local) {
  return ChooseServer(options, local, http::DefaultSocketPath());
}

Status ChooseServer(BoxOptions* options, bool local, const std::string& default_socket) {
  if (local) {
    options->server.clear();
    return Status::Ok();
  }
  if (options->server.empty()) {
    std::string from_env = Env("CODEBOX_SERVER");
    if (!from_env.empty()) {
      if (auto parsed = http::ParseAddress(from_env); !parsed.ok()) {
        return parsed.status().WithContext("$CODEBOX_SERVER");
      }
      options->server = from_env;
    }
  }
  if (options->server.empty()) {
    struct stat st;
    if (::stat(default_socket.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) return Status::Ok();
    if (!ServerAnswers("unix:" + default_socket, kProbeTimeout)) return Status::Ok();
    options->server = "unix:" + default_socket;
  }
  if (options->server_token.empty()) options->server_token = Env("CODEBOX_TOKEN");
  return Status::Ok();
}

}  // namespace codebox::remote
