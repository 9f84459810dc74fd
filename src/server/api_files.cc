// Files in a box: raw bytes in and out, a directory as a tar archive (unpacked and packed on
// the host in a temporary directory that is always removed), listings, removal.
#include <cstdint>
#include <string>

#include "api/file_entry.h"
#include "api/files_query.h"
#include "base/fs.h"
#include "base/json.h"
#include "http/tar.h"
#include "server/api_internal.h"

namespace codebox::server {
namespace {

using nlohmann::json;

constexpr char kTarType[] = "application/x-tar";

bool IsTar(const Call& call) {
  const std::string& type = call.request.Header("content-type");
  return type.compare(0, sizeof kTarType - 1, kTarType) == 0;
}

// A host directory that lives as long as this object.
class TempDir {
 public:
  Status Make() {
    ASSIGN_OR_RETURN(path_, base::MakeTempDir(base::TempRoot(), "codebox-serve-files-"));
    return Status::Ok();
  }
  ~TempDir() {
    if (!path_.empty()) (void)base::RemoveTree(path_);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

Status PutTar(Box& box, const std::string& box_path, const std::string& archive) {
  TempDir dir;
  RETURN_IF_ERROR(dir.Make());
  std::string tree = dir.path() + "/tree";
  RETURN_IF_ERROR(base::MakeDirs(tree, 0700));
  RETURN_IF_ERROR(http::UntarInto(archive, tree, http::UntarLimits{}));
  return box.CopyIn(tree, box_path);
}

StatusOr<std::string> GetTar(Box& box, const std::string& box_path) {
  TempDir dir;
  RETURN_IF_ERROR(dir.Make());
  std::string tree = dir.path() + "/tree";
  RETURN_IF_ERROR(box.CopyOut(box_path, tree));  // capped at the box's disk size
  return http::TarDirectory(tree, UINT64_MAX);
}

}  // namespace

void PutFile(Call& call) {
  auto query = api::FilesQueryFromParams(call.request.query);
  if (!query.ok()) return call.RespondError(query.status());
  const std::string& path = query->path;
  auto lease = call.context.registry->Acquire(call.box_id, call.caller);
  if (!lease.ok()) return call.RespondError(lease.status());
  Status st = IsTar(call)
                  ? PutTar(lease->box(), path, call.request.body)
                  : lease->box().WriteFile(path, call.request.body, query->mode.value_or(0644));
  if (!st.ok()) return call.RespondError(st);
  call.RespondNoContent();
}

void GetFile(Call& call) {
  auto query = api::FilesQueryFromParams(call.request.query);
  if (!query.ok()) return call.RespondError(query.status());
  const std::string& path = query->path;
  auto lease = call.context.registry->Acquire(call.box_id, call.caller);
  if (!lease.ok()) return call.RespondError(lease.status());
  Box& box = lease->box();
  if (query->list) {
    auto entries = box.ListDir(path);
    if (!entries.ok()) return call.RespondError(entries.status());
    return call.RespondJson(200, api::FileListToJson(*entries));
  }
  // A file is read whole (capped at the box's disk size); a directory (the agent refuses to
  // read it as a file: kInvalidArgument) comes out as a tar archive.
  http::Response response;
  auto data = box.ReadFile(path);
  if (data.ok()) {
    response.content_type = "application/octet-stream";
    response.body = std::move(*data);
  } else if (data.status().code() == StatusCode::kInvalidArgument && box.ListDir(path).ok()) {
    auto tar = GetTar(box, path);
    if (!tar.ok()) return call.RespondError(tar.status());
    response.content_type = kTarType;
    response.body = std::move(*tar);
  } else {
    return call.RespondError(data.status());
  }
  (void)call.exchange.Respond(std::move(response));
}

void DeleteFile(Call& call) {
  auto query = api::FilesQueryFromParams(call.request.query);
  if (!query.ok()) return call.RespondError(query.status());
  auto lease = call.context.registry->Acquire(call.box_id, call.caller);
  if (!lease.ok()) return call.RespondError(lease.status());
  Status st = lease->box().Remove(query->path);
  if (!st.ok()) return call.RespondError(st);
  call.RespondNoContent();
}

}  // namespace codebox::server
