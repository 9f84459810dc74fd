#include "e2b/filesystem.h"

#include <algorithm>

#include "base/json.h"
#include "base/json_fields.h"
#include "base/sha256.h"
#include "base/text.h"

namespace codebox::e2b {
namespace {

using nlohmann::json;

constexpr size_t kMaxPartHeaderBytes = 8192;

std::string Permissions(const std::string& type, uint32_t mode) {
  std::string out = type == "dir" ? "d" : type == "symlink" ? "l" : "-";
  const char* rwx = "rwxrwxrwx";
  for (int bit = 8; bit >= 0; --bit) out += (mode >> bit) & 1 ? rwx[8 - bit] : '-';
  return out;
}

// The value of `name="..."` in a Content-Disposition, with undici's escapes undone; nullopt
// when absent.
std::optional<std::string> DispositionParam(std::string_view header, std::string_view name) {
  const std::string key = std::string(name) + "=\"";
  for (size_t pos = header.find(key); pos != std::string_view::npos;
       pos = header.find(key, pos + 1)) {
    if (pos > 0 && header[pos - 1] != ' ' && header[pos - 1] != ';')
      continue;  // "filename" in "xfilename"
    const size_t start = pos + key.size();
    const size_t end = header.find('"', start);
    if (end == std::string_view::npos) return std::nullopt;
    std::string value(header.substr(start, end - start));
    for (auto [from, to] : {std::pair{"%22", "\""}, {"%0D", "\r"}, {"%0A", "\n"}}) {
      for (size_t at = value.find(from); at != std::string::npos; at = value.find(from, at + 1)) {
        value.replace(at, 3, to);
      }
    }
    return value;
  }
  return std::nullopt;
}

}  // namespace

StatusOr<std::string> PathFromJson(const json& body, const char* key) {
  if (!body.is_object()) return InvalidArgument("the request is not a JSON object");
  base::JsonFields f(body, "filesystem request", StatusCode::kInvalidArgument);
  ASSIGN_OR_RETURN(std::string path, f.String(key));
  if (path.empty() || path.size() > kMaxPathBytes || path.find('\0') != std::string::npos) {
    return f.Fault(
        key, "is empty, longer than " + std::to_string(kMaxPathBytes) + " bytes, or holds a NUL");
  }
  return path;
}

StatusOr<ListDirRequest> ListDirFromJson(const json& body) {
  ListDirRequest out;
  ASSIGN_OR_RETURN(out.path, PathFromJson(body));
  base::JsonFields f(body, "list request", StatusCode::kInvalidArgument);
  ASSIGN_OR_RETURN(int64_t depth, f.Int("depth", 0, kMaxListDepth, 1));
  out.depth = depth == 0 ? 1 : static_cast<int>(depth);
  return out;
}

StatusOr<WatchDirRequest> WatchDirFromJson(const json& body) {
  WatchDirRequest out;
  ASSIGN_OR_RETURN(out.path, PathFromJson(body));
  base::JsonFields f(body, "watch request", StatusCode::kInvalidArgument);
  ASSIGN_OR_RETURN(out.recursive, f.Bool("recursive", false));
  return out;
}

std::string WatchEventJson(std::string_view name, WatchEvent type) {
  const char* names[] = {"EVENT_TYPE_CREATE", "EVENT_TYPE_WRITE", "EVENT_TYPE_REMOVE",
                         "EVENT_TYPE_CHMOD"};
  return base::JsonText(
      json{{"filesystem", {{"name", std::string(name)}, {"type", names[static_cast<int>(type)]}}}});
}

std::string AbsolutePath(std::string_view path, std::string_view home) {
  std::string whole =
      path.starts_with('/') ? std::string(path) : std::string(home) + "/" + std::string(path);
  std::vector<std::string_view> parts;
  std::string_view rest = whole;
  while (!rest.empty()) {
    const size_t slash = std::min(rest.find('/'), rest.size());
    std::string_view part = rest.substr(0, slash);
    rest.remove_prefix(std::min(slash + 1, rest.size()));
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
      continue;
    }
    parts.push_back(part);
  }
  std::string out;
  for (std::string_view part : parts) out += "/" + std::string(part);
  return out.empty() ? "/" : out;
}

json EntryInfoToJson(const FileEntry& e) {
  const char* type = e.type == "file"      ? "FILE_TYPE_FILE"
                     : e.type == "dir"     ? "FILE_TYPE_DIRECTORY"
                     : e.type == "symlink" ? "FILE_TYPE_SYMLINK"
                                           : "FILE_TYPE_UNSPECIFIED";
  return {{"name", e.name},  {"type", type},
          {"path", e.path},  {"size", std::to_string(e.size)},
          {"mode", e.mode},  {"permissions", Permissions(e.type, e.mode)},
          {"owner", "user"}, {"group", "user"}};
}

StatusOr<std::vector<FormFile>> ParseFormFiles(std::string_view content_type,
                                               std::string_view body) {
  const std::string lowered = base::AsciiLower(content_type);
  if (!lowered.starts_with("multipart/form-data")) {
    return InvalidArgument("an upload is multipart/form-data or application/octet-stream");
  }
  const size_t at = lowered.find("boundary=");
  if (at == std::string::npos) return InvalidArgument("the multipart upload names no boundary");
  std::string_view boundary = content_type.substr(at + 9);
  boundary = boundary.substr(0, std::min(boundary.find(';'), boundary.size()));
  if (boundary.size() >= 2 && boundary.front() == '"' && boundary.back() == '"') {
    boundary = boundary.substr(1, boundary.size() - 2);
  }
  if (boundary.empty() || boundary.size() > 200) {
    return InvalidArgument("the multipart boundary is empty or longer than 200 bytes");
  }
  const std::string dash = "--" + std::string(boundary);
  const std::string delimiter = "\r\n" + dash;
  std::vector<FormFile> files;
  size_t pos = body.find(dash);
  if (pos == std::string_view::npos) return InvalidArgument("the multipart body has no part");
  pos += dash.size();
  while (true) {
    if (body.substr(pos, 2) == "--") return files;  // the closing delimiter
    if (body.substr(pos, 2) != "\r\n") return InvalidArgument("a malformed multipart delimiter");
    pos += 2;
    const size_t head_end = body.find("\r\n\r\n", pos);
    if (head_end == std::string_view::npos || head_end - pos > kMaxPartHeaderBytes) {
      return InvalidArgument("a multipart part's headers are unended or past 8 KiB");
    }
    const std::string_view head = body.substr(pos, head_end - pos);
    const size_t data_start = head_end + 4;
    const size_t data_end = body.find(delimiter, data_start);
    if (data_end == std::string_view::npos) {
      return InvalidArgument("a multipart part is not ended by the boundary");
    }
    std::optional<std::string> filename;
    for (size_t line = 0; line < head.size();) {
      const size_t eol = std::min(head.find("\r\n", line), head.size());
      const std::string_view header = head.substr(line, eol - line);
      if (base::AsciiLower(header.substr(0, 20)).starts_with("content-disposition:")) {
        filename = DispositionParam(header, "filename");
      }
      line = eol + 2;
    }
    if (!filename || filename->empty() || filename->size() > kMaxPathBytes ||
        filename->find('\0') != std::string::npos) {
      return InvalidArgument("a multipart part has no usable filename (the file's path)");
    }
    if (files.size() == kMaxFormParts) {
      return InvalidArgument("an upload of more than " + std::to_string(kMaxFormParts) + " files");
    }
    files.push_back({std::move(*filename), body.substr(data_start, data_end - data_start)});
    pos = data_end + delimiter.size();
  }
}

std::string SignFileUrl(const FileUrlSignature& request, std::string_view access_token) {
  std::string raw = request.path + ":" + request.operation + ":" + request.user + ":";
  raw += access_token;
  if (request.expiration) raw += ":" + std::to_string(*request.expiration);
  std::string encoded = base::EncodeBase64(base::Sha256Digest(raw));
  while (!encoded.empty() && encoded.back() == '=') encoded.pop_back();
  return "v1_" + encoded;
}

StatusOr<FileUrlSignature> FileUrlSignatureFrom(std::string_view method,
                                                const std::map<std::string, std::string>& query,
                                                uint64_t now) {
  auto value = [&query](const char* key) {
    auto it = query.find(key);
    return it == query.end() ? std::string() : it->second;
  };
  FileUrlSignature out;
  if (method == "GET") {
    out.operation = "read";
  } else if (method == "POST") {
    out.operation = "write";
  } else {
    return InvalidArgument("a signed /files URL is read with GET or written with POST");
  }
  out.path = value("path");
  out.user = value("username");
  out.signature = value("signature");
  if (out.path.size() > kMaxPathBytes || out.user.size() > 64) {
    return InvalidArgument("the signed URL's path or username is too long");
  }
  // "v1_" and 43 characters of base64 (32 bytes, unpadded).
  if (out.signature.size() != 46 || !out.signature.starts_with("v1_")) {
    return InvalidArgument("the URL's signature is not a v1 signature");
  }
  if (const std::string text = value("signature_expiration"); !text.empty()) {
    out.expiration = base::ParseDecimal(text, uint64_t{1} << 40);
    if (!out.expiration) return InvalidArgument("signature_expiration is not Unix seconds");
    if (*out.expiration < now) return PermissionDenied("the URL's signature has expired");
  }
  return out;
}

json WrittenFilesToJson(const std::vector<std::string>& paths) {
  json out = json::array();
  for (const std::string& path : paths) {
    const size_t slash = path.rfind('/');
    out.push_back({{"path", path},
                   {"name", slash == std::string::npos ? path : path.substr(slash + 1)},
                   {"type", "file"}});
  }
  return out;
}

}  // namespace codebox::e2b
