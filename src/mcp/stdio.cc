#include "mcp/stdio.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "base/log.h"
#include "mcp/jsonrpc.h"

namespace codebox::mcp {
namespace {

using nlohmann::json;

// Writes whole lines to the out fd, one writer at a time; remembers when the reader is gone.
// A client that stops reading must not keep a stop from ending the server: each piece of at
// most PIPE_BUF bytes is written only when poll says it fits, or the stop fd wins.
class LineWriter {
 public:
  LineWriter(int fd, int stop_fd) : fd_(fd), stop_fd_(stop_fd) {}

  void Write(const json& message) {
    std::string line = Serialize(message) + "\n";
    std::lock_guard lock(mu_);
    if (broken_ || muted_) return;
    for (size_t done = 0; done < line.size();) {
      pollfd fds[2] = {{fd_, POLLOUT, 0}, {stop_fd_, POLLIN, 0}};
      const int ready = ::poll(fds, stop_fd_ >= 0 ? 2 : 1, -1);
      if (ready < 0 && errno == EINTR) continue;
      if (ready > 0 && stop_fd_ >= 0 && fds[1].revents != 0) {
        broken_ = true;  // stopping: the reader sees the stop fd too
        return;
      }
      ssize_t n = ready < 0 ? -1
                            : ::write(fd_, line.data() + done,
                                      std::min<size_t>(line.size() - done, PIPE_BUF));
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) {
        CODEBOX_LOG(kWarn, "mcp: the output is gone (" << (n < 0 ? strerror(errno) : "closed")
                                                       << "); ending");
        broken_ = true;
        return;
      }
      done += static_cast<size_t>(n);
    }
  }
  bool broken() {
    std::lock_guard lock(mu_);
    return broken_;
  }
  void Mute() {
    std::lock_guard lock(mu_);
    muted_ = true;
  }

 private:
  const int fd_;
  const int stop_fd_;
  std::mutex mu_;
  bool broken_ = false;
  bool muted_ = false;
};

// The tools/call requests queued or running. Shared with the worker that answers them, which
// may outlive ServeStdio (StdioEnd::kBusy).
struct Calls {
  std::mutex mu;
  std::condition_variable changed;
  std::deque<json> queue;
  std::map<std::string, json> pending;  // id's JSON text -> id, queued or running
  bool closed = false;
};

void Work(Session& session, LineWriter& out, std::shared_ptr<Calls> calls) {
  for (;;) {
    json message;
    {
      std::unique_lock lock(calls->mu);
      calls->changed.wait(lock, [&] { return calls->closed || !calls->queue.empty(); });
      if (calls->queue.empty()) return;
      message = std::move(calls->queue.front());
      calls->queue.pop_front();
    }
    if (auto answer = session.Handle(message)) out.Write(*answer);
    std::lock_guard lock(calls->mu);
    calls->pending.erase(message["id"].dump());
    calls->changed.notify_all();
  }
}

class Reader {
 public:
  Reader(Session& session, LineWriter& out, std::shared_ptr<Calls> calls,
         const StdioOptions& options)
      : session_(session), out_(out), calls_(std::move(calls)), options_(options) {}

  // Takes the bytes read; each complete line is handled.
  void Feed(std::string_view bytes) {
    while (!bytes.empty()) {
      const size_t newline = bytes.find('\n');
      const std::string_view part = bytes.substr(0, newline);
      if (!skipping_) {
        if (line_.size() + part.size() > options_.max_line_bytes) {
          out_.Write(ErrorAnswer(nullptr, kInvalidRequest,
                                 "Invalid Request: a message is longer than " +
                                     std::to_string(options_.max_line_bytes) +
                                     " bytes; it is skipped"));
          line_.clear();
          line_.shrink_to_fit();
          skipping_ = true;
        } else {
          line_.append(part);
        }
      }
      if (newline == std::string_view::npos) return;
      if (!skipping_) HandleLine();
      skipping_ = false;
      line_.clear();
      bytes.remove_prefix(newline + 1);
    }
  }

 private:
  void HandleLine() {
    std::string_view text = line_;
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    if (text.find_first_not_of(" \t") == std::string_view::npos) return;
    ParsedMessage parsed = ParseMessage(text);
    if (!parsed.message) {
      out_.Write(*parsed.error_answer);
      return;
    }
    if (DropQueued(*parsed.message)) return;
    if (!IsRequest(*parsed.message, "tools/call")) {
      if (auto answer = session_.Handle(*parsed.message)) out_.Write(*answer);
      return;
    }
    const json id = (*parsed.message)["id"];
    std::lock_guard lock(calls_->mu);
    if (calls_->pending.size() >= options_.max_pending) {
      out_.Write(ErrorAnswer(id, kInternalError,
                             "too many tool calls in flight (" +
                                 std::to_string(options_.max_pending) +
                                 "); wait for answers before sending more"));
      return;
    }
    calls_->pending.emplace(id.dump(), id);
    calls_->queue.push_back(std::move(*parsed.message));
    calls_->changed.notify_one();
  }

  // A notifications/cancelled of a call still queued: the call is dropped (no answer, as the
  // spec asks). One that runs is the session's to cancel.
  bool DropQueued(const json& message) {
    if (!message.is_object() || message.contains("id") ||
        message.value("method", json()) != "notifications/cancelled") {
      return false;
    }
    const json params = message.value("params", json::object());
    if (!params.is_object() || !params.contains("requestId")) return false;
    const std::string key = params["requestId"].dump();
    std::lock_guard lock(calls_->mu);
    for (auto it = calls_->queue.begin(); it != calls_->queue.end(); ++it) {
      if ((*it)["id"].dump() == key) {
        calls_->queue.erase(it);
        calls_->pending.erase(key);
        calls_->changed.notify_all();
        return true;
      }
    }
    return false;
  }

  Session& session_;
  LineWriter& out_;
  std::shared_ptr<Calls> calls_;
  const StdioOptions& options_;
  std::string line_;
  bool skipping_ = false;
};

}  // namespace

StdioEnd ServeStdio(Session& session, int in_fd, int out_fd, int stop_fd,
                    const StdioOptions& options) {
  // The writer outlives this call when the worker does (kBusy), as the session does.
  auto* out = new LineWriter(out_fd, stop_fd);
  auto calls = std::make_shared<Calls>();
  std::thread worker(Work, std::ref(session), std::ref(*out), calls);
  Reader reader(session, *out, calls, options);
  bool stopped = false;
  std::vector<char> buffer(64 << 10);
  while (!out->broken()) {
    pollfd fds[2] = {{in_fd, POLLIN, 0}, {stop_fd, POLLIN, 0}};
    const int n = ::poll(fds, stop_fd >= 0 ? 2 : 1, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      CODEBOX_LOG(kError, "mcp: poll on stdin: " << strerror(errno));
      break;
    }
    if (stop_fd >= 0 && fds[1].revents != 0) {
      stopped = true;
      break;
    }
    if (fds[0].revents == 0) continue;
    const ssize_t got = ::read(in_fd, buffer.data(), buffer.size());
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got <= 0) break;  // EOF (or a read error): the client is done
    reader.Feed(std::string_view(buffer.data(), static_cast<size_t>(got)));
  }

  std::unique_lock lock(calls->mu);
  if (stopped || out->broken()) {
    // Nobody waits for these answers: cancel every call (a running cell is interrupted).
    out->Mute();
    for (const json& queued : calls->queue) calls->pending.erase(queued["id"].dump());
    calls->queue.clear();  // never started: nothing to cancel in the session
    std::vector<json> ids;
    for (const auto& [key, id] : calls->pending) ids.push_back(id);
    lock.unlock();
    for (const json& id : ids) {
      session.Handle({{"jsonrpc", "2.0"},
                      {"method", "notifications/cancelled"},
                      {"params", {{"requestId", id}, {"reason", "the server is stopping"}}}});
    }
    lock.lock();
  }
  calls->closed = true;
  calls->changed.notify_all();
  const bool ended =
      !(stopped || out->broken()) ||
      calls->changed.wait_for(lock, options.stop_grace, [&] { return calls->pending.empty(); });
  lock.unlock();
  if (!ended) {
    worker.detach();
    return StdioEnd::kBusy;
  }
  worker.join();
  delete out;
  return StdioEnd::kDone;
}

}  // namespace codebox::mcp
