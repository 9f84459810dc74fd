#include "server/e2b_sandboxes.h"

#include <algorithm>

#include "base/random.h"
#include "base/text.h"
#include "http/request.h"

namespace codebox::server {

E2bSandbox E2bSandboxes::Add(E2bSandbox sandbox) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sandboxes_.find(sandbox.id);
  if (it != sandboxes_.end()) return it->second;
  sandbox.access_token = base::HexEncode(base::RandomBytes(32));
  std::string id = sandbox.id;
  return sandboxes_.emplace(std::move(id), std::move(sandbox)).first->second;
}

std::optional<E2bSandbox> E2bSandboxes::Find(std::string_view id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end()) return std::nullopt;
  return it->second;
}

std::optional<E2bSandbox> E2bSandboxes::Authenticate(std::string_view id,
                                                     std::string_view token) const {
  std::optional<E2bSandbox> found = Find(id);
  // Compared even when the id is unknown (against a token of the same length), so the time
  // taken does not say which ids exist.
  const std::string expected = found ? found->access_token : std::string(64, '\0');
  const bool matches = http::MatchToken(token, {expected}) == 0;
  if (!found || !matches) return std::nullopt;
  return found;
}

std::optional<E2bSandbox> E2bSandboxes::AuthenticateSignature(
    const std::function<std::string(std::string_view token)>& sign,
    std::string_view signature) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::optional<E2bSandbox> found;
  for (const auto& [id, s] : sandboxes_) {
    if (s.gone) continue;
    if (http::MatchToken(signature, {sign(s.access_token)}) == 0 && !found) found = s;
  }
  return found;
}

std::vector<E2bSandbox> E2bSandboxes::All() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<E2bSandbox> out;
  out.reserve(sandboxes_.size());
  for (const auto& [id, s] : sandboxes_) {
    if (!s.gone) out.push_back(s);
  }
  return out;
}

Status E2bSandboxes::AddContext(std::string_view id, E2bContext context, size_t max) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end() || it->second.gone) return NotFound("the sandbox is not running");
  if (it->second.contexts.size() >= max) {
    return ResourceExhausted("the sandbox holds " + std::to_string(max) +
                             " contexts, its most; remove one first");
  }
  it->second.contexts.push_back(std::move(context));
  return Status::Ok();
}

std::optional<E2bCpuSample> E2bSandboxes::SwapCpuSample(std::string_view id, E2bCpuSample now) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end()) return std::nullopt;
  return std::exchange(it->second.last_cpu, now);
}

bool E2bSandboxes::RemoveContext(std::string_view id, std::string_view context_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end()) return false;
  auto& contexts = it->second.contexts;
  auto c = std::find_if(contexts.begin(), contexts.end(),
                        [&](const E2bContext& x) { return x.id == context_id; });
  if (c == contexts.end()) return false;
  contexts.erase(c);
  return true;
}

void E2bSandboxes::Remove(std::string_view id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end() || it->second.gone) return;
  it->second.gone = true;
  gone_.push_back(it->first);
  if (gone_.size() > kMaxGone) {
    sandboxes_.erase(gone_.front());
    gone_.pop_front();
  }
}

}  // namespace codebox::server
