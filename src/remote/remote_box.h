// Boxes on a codebox server (`codebox serve`), for Box::Create with BoxOptions::server set and
// for the CLI's one-shot `run`. Every Box call is one HTTP request of the server's API v1
// (docs/server.md); everything the server answers is checked (src/api).
#ifndef CODEBOX_REMOTE_REMOTE_BOX_H_
#define CODEBOX_REMOTE_REMOTE_BOX_H_

#include <memory>
#include <string_view>

#include "box_impl/box_impl.h"
#include "codebox/box.h"
#include "codebox/options.h"
#include "codebox/status.h"

namespace codebox::remote {

// POST /v1/boxes with `options` (server, server_token, home and prestart stay here): a Box
// implementation whose calls go to that box. Box::Create wraps it.
StatusOr<std::unique_ptr<Box::Impl>> CreateRemoteBox(const BoxOptions& options);

// POST /v1/run: the server takes a warm pool box matching `options` (or starts one), runs
// `python3 -c code` in it, destroys it and answers; the fast path of `codebox run`. Output is
// streamed to exec.on_stdout / on_stderr when set. exec.timeout: as ExecOptions.
StatusOr<ExecResult> RunOnServer(const BoxOptions& options, std::string_view code,
                                 const ExecOptions& exec);

}  // namespace codebox::remote

#endif  // CODEBOX_REMOTE_REMOTE_BOX_H_
