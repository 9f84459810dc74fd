// Where the boxes of the CLI (`run`, `exec`, `ask`, `repl`) and of Python's CodeBox run: on a
// codebox server or in this process. One rule for all of them:
//   1. `local` (--local, CodeBox(local=True)): in this process;
//   2. the server given (--server, CodeBox(server=...));
//   3. $CODEBOX_SERVER;
//   4. the default socket (http::DefaultSocketPath()) when it exists and a server answers on
//      it (GET /healthz, under a short deadline); one that does not answer is passed over,
//      with a debug log, never an error;
//   5. in this process.
// The token: the one given (--server-token, token=), else $CODEBOX_TOKEN.
#ifndef CODEBOX_REMOTE_SERVER_CHOICE_H_
#define CODEBOX_REMOTE_SERVER_CHOICE_H_

#include <chrono>
#include <string>

#include "codebox/options.h"
#include "codebox/status.h"

namespace codebox::remote {

// Sets options->server (empty: in this process) and options->server_token by the rule above.
// Errors: a malformed $CODEBOX_SERVER (named as such).
Status ChooseServer(BoxOptions* options, bool local);
// The same with another default socket (tests).
Status ChooseServer(BoxOptions* options, bool local, const std::string& default_socket);

// Whether a codebox server answers GET /healthz at `address` within `timeout`.
bool ServerAnswers(const std::string& address, std::chrono::milliseconds timeout);

}  // namespace codebox::remote

#endif  // CODEBOX_REMOTE_SERVER_CHOICE_H_
