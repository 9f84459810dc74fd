// envd's filesystem service (filesystem.Filesystem) and its REST /files route, on the box's
// own file calls (Box::ReadFile, WriteFile, ListDir, Remove) and, for what those lack, the
// box's own mkdir and mv; WatchDir by looking again and again. The polling watchers
// (CreateWatcher, ...), which E2B's SDKs do not use, are unimplemented. A listing's names and sizes
// are the box's claim, bounded by the host (Box::ListDir) before they get here; paths relative to
// the sandbox's home are made absolute only to name them in answers, never to reach outside the
// box.
#include <chrono>
#include <deque>
#include <map>
#include <thread>

#include "base/json.h"
#include "base/text.h"
#include "e2b/filesystem.h"
#include "e2b/gzip.h"
#include "server/api_e2b.h"

namespace codebox::server {
namespace {

using nlohmann::json;
namespace connect = e2b::connect;

std::string Absolute(std::string_view path) { return e2b::AbsolutePath(path, kE2bHome); }

// The entry of `path` as its parent lists it ("/" is a directory of its own).
StatusOr<FileEntry> Stat(Box& box, const std::string& path) {
  const std::string absolute = Absolute(path);
  if (absolute == "/")
    return FileEntry{.name = "/", .path = "/", .type = "dir", .size = 0, .mode = 0755};
  const size_t slash = absolute.rfind('/');
  const std::string parent = slash == 0 ? "/" : absolute.substr(0, slash);
  const std::string name = absolute.substr(slash + 1);
  auto listed = box.ListDir(parent);
  if (!listed.ok()) {
    if (listed.status().code() == StatusCode::kNotFound ||
        listed.status().code() == StatusCode::kInvalidArgument) {
      return NotFound("no file or directory " + base::Excerpt(absolute));
    }
    return listed.status();
  }
  for (FileEntry& e : *listed) {
    if (e.name == name) {
      e.path = absolute;
      return e;
    }
  }
  return NotFound("no file or directory " + base::Excerpt(absolute));
}

// A directory's entries `depth` levels down (envd's ListDir), breadth first, at most
// kMaxListEntries of them.
StatusOr<std::vector<FileEntry>> Walk(Box& box, const std::string& root, int depth) {
  ASSIGN_OR_RETURN(FileEntry top, Stat(box, root));
  if (top.type != "dir") return InvalidArgument(base::Excerpt(top.path) + " is not a directory");
  std::vector<FileEntry> out;
  std::deque<std::pair<std::string, int>> dirs = {{top.path, 1}};
  while (!dirs.empty()) {
    auto [dir, level] = dirs.front();
    dirs.pop_front();
    ASSIGN_OR_RETURN(std::vector<FileEntry> entries, box.ListDir(dir));
    for (FileEntry& e : entries) {
      e.path = (dir == "/" ? "" : dir) + "/" + e.name;
      if (e.type == "dir" && level < depth) dirs.emplace_back(e.path, level + 1);
      if (out.size() == e2b::kMaxListEntries) {
        return Status(StatusCode::kLimitExceeded,
                      "the listing passes " + std::to_string(e2b::kMaxListEntries) +
                          " entries: list a smaller depth or directory");
      }
      out.push_back(std::move(e));
    }
  }
  return out;
}

// The box's own program for what its file calls lack; its failure in its own words (an
// excerpt: the box wrote them).
Status RunInBox(Box& box, const std::vector<std::string>& argv) {
  ExecOptions o;
  o.timeout = std::chrono::seconds(30);
  ASSIGN_OR_RETURN(ExecResult r, box.Exec(argv, o));
  if (r.ok()) return Status::Ok();
  return InvalidArgument(argv[0] + " failed: " + base::TerminalSafe(r.stderr_data, 300));
}

json Entry(const FileEntry& e) { return {{"entry", e2b::EntryInfoToJson(e)}}; }

// What a watch compares from one look to the next: each entry below the watched directory, by
// its path relative to it. The box's file calls give no modification time, so a rewrite that
// keeps a file's size is not seen.
struct Seen {
  std::string type;
  uint64_t size = 0;
  uint32_t mode = 0;
};
using Snapshot = std::map<std::string, Seen>;

StatusOr<Snapshot> Look(Box& box, const std::string& root, bool recursive) {
  ASSIGN_OR_RETURN(std::vector<FileEntry> entries,
                   Walk(box, root, recursive ? e2b::kMaxListDepth : 1));
  const std::string prefix = root == "/" ? "/" : root + "/";
  Snapshot out;
  for (const FileEntry& e : entries) {
    out[e.path.substr(prefix.size())] = {e.type, e.size, e.mode};
  }
  return out;
}

// envd's WatchDir, by looking again every few hundred milliseconds: a created, written
// (resized), removed or re-moded entry is an event. It ends at Connect-Timeout-Ms
// (deadline_exceeded, as envd ends it), when the client goes, when the directory goes, or with
// the box; a keepalive goes out after 30 s without events.
void WatchDir(Call& call, Box& box) {
  auto message = ConnectMessage(call.request, /*streaming=*/true);
  if (!message.ok()) return RespondStreamError(call, message.status());
  auto request = e2b::WatchDirFromJson(*message);
  if (!request.ok()) return RespondStreamError(call, request.status());
  auto timeout = ConnectTimeout(call);
  if (!timeout.ok()) return RespondStreamError(call, timeout.status());
  const std::string root = Absolute(request->path);
  auto seen = Look(box, root, request->recursive);
  if (!seen.ok()) return RespondStreamError(call, seen.status());
  ConnectStream stream(call.exchange);
  if (!stream.Open().ok()) return;
  stream.Start(base::JsonText(json{{"start", json::object()}}));
  using Clock = std::chrono::steady_clock;
  const auto deadline =
      Clock::now() + timeout->value_or(call.context.options.ceilings.exec_timeout);
  auto quiet_since = Clock::now();
  while (true) {
    // Larger trees are looked at less often: each look lists every directory in them.
    const auto interval = std::chrono::milliseconds(seen->size() > 1000 ? 2000 : 250);
    for (auto until = Clock::now() + interval; Clock::now() < until;) {
      if (call.exchange.ClientGone() || stream.failed()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (Clock::now() >= deadline) {
      return stream.End(Status(StatusCode::kDeadlineExceeded, "the watch passed its timeout"));
    }
    auto now = Look(box, root, request->recursive);
    if (!now.ok()) {
      call.NoteError(now.status());
      return stream.End(now.status());
    }
    bool any = false;
    auto send = [&](const std::string& name, e2b::WatchEvent type) {
      stream.Send(e2b::WatchEventJson(name, type));
      any = true;
    };
    for (const auto& [name, entry] : *now) {
      auto before = seen->find(name);
      if (before == seen->end()) {
        send(name, e2b::WatchEvent::kCreate);
      } else if (before->second.size != entry.size || before->second.type != entry.type) {
        send(name, e2b::WatchEvent::kWrite);
      } else if (before->second.mode != entry.mode) {
        send(name, e2b::WatchEvent::kChmod);
      }
    }
    for (const auto& [name, entry] : *seen) {
      if (!now->contains(name)) send(name, e2b::WatchEvent::kRemove);
    }
    if (any) {
      quiet_since = Clock::now();
    } else if (Clock::now() - quiet_since > std::chrono::seconds(30)) {
      stream.Send(base::JsonText(json{{"keepalive", json::object()}}));
      quiet_since = Clock::now();
    }
    seen = std::move(now);
  }
}

}  // namespace

void FilesystemService(Call& call, Box& box, std::string_view method) {
  if (method == "WatchDir") return WatchDir(call, box);
  auto message = ConnectMessage(call.request, /*streaming=*/false);
  if (!message.ok()) return RespondConnectError(call, message.status());
  if (method == "Stat") {
    auto path = e2b::PathFromJson(*message);
    if (!path.ok()) return RespondConnectError(call, path.status());
    auto entry = Stat(box, *path);
    if (!entry.ok()) return RespondConnectError(call, entry.status());
    return RespondConnect(call, Entry(*entry));
  }
  if (method == "ListDir") {
    auto request = e2b::ListDirFromJson(*message);
    if (!request.ok()) return RespondConnectError(call, request.status());
    auto entries = Walk(box, request->path, request->depth);
    if (!entries.ok()) return RespondConnectError(call, entries.status());
    json list = json::array();
    for (const FileEntry& e : *entries) list.push_back(e2b::EntryInfoToJson(e));
    return RespondConnect(call, {{"entries", list}});
  }
  if (method == "MakeDir") {
    auto path = e2b::PathFromJson(*message);
    if (!path.ok()) return RespondConnectError(call, path.status());
    if (auto existing = Stat(box, *path); existing.ok()) {
      return existing->type == "dir"
                 ? RespondConnectError(
                       call, connect::Code::kAlreadyExists,
                       "directory " + base::Excerpt(existing->path) + " already exists")
                 : RespondConnectError(call, connect::Code::kInvalidArgument,
                                       base::Excerpt(existing->path) + " is a file");
    }
    if (Status st = RunInBox(box, {"mkdir", "-p", "--", Absolute(*path)}); !st.ok()) {
      return RespondConnectError(call, st);
    }
    auto entry = Stat(box, *path);
    if (!entry.ok()) return RespondConnectError(call, entry.status());
    return RespondConnect(call, Entry(*entry));
  }
  if (method == "Move") {
    auto source = e2b::PathFromJson(*message, "source");
    if (!source.ok()) return RespondConnectError(call, source.status());
    auto destination = e2b::PathFromJson(*message, "destination");
    if (!destination.ok()) return RespondConnectError(call, destination.status());
    if (auto from = Stat(box, *source); !from.ok()) return RespondConnectError(call, from.status());
    Status moved = RunInBox(box, {"mv", "-T", "--", Absolute(*source), Absolute(*destination)});
    if (!moved.ok()) return RespondConnectError(call, moved);
    auto entry = Stat(box, *destination);
    if (!entry.ok()) return RespondConnectError(call, entry.status());
    return RespondConnect(call, Entry(*entry));
  }
  if (method == "Remove") {
    auto path = e2b::PathFromJson(*message);
    if (!path.ok()) return RespondConnectError(call, path.status());
    if (Status st = box.Remove(Absolute(*path)); !st.ok()) return RespondConnectError(call, st);
    return RespondConnect(call, json::object());
  }
  RespondConnectError(call, connect::Code::kUnimplemented,
                      "filesystem." + std::string(method) + " is not supported by codebox");
}

// GET /files?path=P: the file's bytes. POST /files: a multipart form of files (each part's
// filename its path, or the query's path for one file), or one file's raw bytes
// (application/octet-stream with ?path=); parents are made, files replaced.
void FilesRoute(Call& call, Box& box, const E2bSandbox& sandbox) {
  const auto& query = call.request.query;
  if (auto user = query.find("username");
      user != query.end() && user->second != "user" && user->second != "root") {
    return RespondE2bError(call, InvalidArgument("a sandbox has the users \"user\" and \"root\""));
  }
  const auto path = query.find("path");
  const bool has_path = path != query.end() && !path->second.empty();
  if (call.request.method == "GET") {
    if (!has_path) return RespondE2bError(call, InvalidArgument("GET /files needs ?path="));
    auto data = box.ReadFile(Absolute(path->second));
    if (!data.ok()) return RespondE2bError(call, data.status());
    http::Response response;
    response.content_type = "application/octet-stream";
    response.body = std::move(*data);
    (void)call.exchange.Respond(std::move(response));
    return;
  }
  if (call.request.method != "POST") {
    return RespondE2bError(call, InvalidArgument("/files takes GET and POST"));
  }
  // files.write(..., {gzip: true}): inflated here, to no more than a plain body may hold, nor
  // than the sandbox's disk.
  const std::string encoding = base::AsciiLower(call.request.Header("content-encoding"));
  std::string inflated;
  if (encoding == "gzip") {
    const uint64_t most = std::min(call.context.options.max_inflated_bytes,
                                   std::max<uint64_t>(sandbox.disk_mib, 1) << 20);
    auto body = e2b::Gunzip(call.request.body, most);
    if (!body.ok()) return RespondE2bError(call, body.status());
    inflated = std::move(*body);
  } else if (!encoding.empty() && encoding != "identity") {
    return RespondE2bError(call, InvalidArgument("uploads are gzip or not compressed, not '" +
                                                 base::Excerpt(encoding) + "'"));
  }
  const std::string& body = encoding == "gzip" ? inflated : call.request.body;
  std::vector<std::string> written;
  const std::string& type = call.request.Header("content-type");
  if (base::AsciiLower(type).starts_with("application/octet-stream")) {
    if (!has_path) return RespondE2bError(call, InvalidArgument("a raw upload needs ?path="));
    written.push_back(Absolute(path->second));
    if (Status st = box.WriteFile(written.back(), body); !st.ok()) {
      return RespondE2bError(call, st);
    }
  } else {
    auto files = e2b::ParseFormFiles(type, body);
    if (!files.ok()) return RespondE2bError(call, files.status());
    for (const e2b::FormFile& file : *files) {
      written.push_back(Absolute(has_path && files->size() == 1 ? path->second : file.filename));
      if (Status st = box.WriteFile(written.back(), file.data); !st.ok()) {
        return RespondE2bError(call, st);
      }
    }
  }
  call.RespondJson(200, e2b::WrittenFilesToJson(written));
}

}  // namespace codebox::server
