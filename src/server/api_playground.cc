// The web playground: GET / (index.html) and GET /playground/<file> (its script and style),
// embedded in the binary so that the page needs nothing from the network. The page talks
// only to this server's API; everything from a box reaches it as text (textContent), as an
// image, or inside a sandboxed iframe, and the policy below is the second line: no inline
// script, no script from anywhere but here, no framing of the page by another site.
#include <string_view>

#include "server/api_e2b.h"
#include "server/api_internal.h"
#include "server/playground_files.h"

namespace codebox::server {
namespace {

struct PlaygroundAsset {
  std::string_view path;
  std::string_view content_type;
  const char* body;
};

constexpr PlaygroundAsset kAssets[] = {
    {"/", "text/html; charset=utf-8", kPlaygroundHtml},
    {"/playground/playground.js", "text/javascript; charset=utf-8", kPlaygroundJs},
    {"/playground/playground.css", "text/css; charset=utf-8", kPlaygroundCss},
};

// Sandboxed result frames (srcdoc) inherit this policy too, so box HTML in them gets no
// script, style or image from anywhere either.
constexpr char kContentSecurityPolicy[] =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "connect-src 'self'; frame-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'";

}  // namespace

std::vector<std::string> PublicPaths() {
  std::vector<std::string> paths = {"/healthz"};
  for (const PlaygroundAsset& asset : kAssets) paths.emplace_back(asset.path);
  return paths;
}

bool HandlerAuthenticates(const http::Request& request) { return IsE2bSandboxRequest(request); }

void PlaygroundFile(Call& call) {
  for (const PlaygroundAsset& asset : kAssets) {
    if (call.request.path != asset.path) continue;
    http::Response response;
    response.content_type = std::string(asset.content_type);
    response.body = asset.body;
    // Revalidated on each load, so a new codebox never runs with an old script.
    response.headers = {{"Cache-Control", "no-cache"},
                        {"Content-Security-Policy", kContentSecurityPolicy},
                        {"X-Content-Type-Options", "nosniff"},
                        {"X-Frame-Options", "DENY"},
                        {"Referrer-Policy", "no-referrer"}};
    (void)call.exchange.Respond(std::move(response));
    return;
  }
  call.RespondError(NotFound("no playground file " + call.request.path));
}

}  // namespace codebox::server
