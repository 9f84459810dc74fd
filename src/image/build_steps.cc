#include "image/build_steps.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <sstream>

#include "base/fs.h"
#include "base/io.h"
#include "base/subprocess.h"
#include "base/unique_fd.h"
#include "image/recipe.h"
#include "image/tree_fs.h"

namespace codebox::image {
namespace {

constexpr double kProgressEverySeconds = 5;

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// debootstrap and apt-get on a slow archive take minutes; a tool still running after this is
// hung.
constexpr auto kToolTimeout = std::chrono::hours(1);

// The tools get a small known environment, not ours; proxies are kept so that a host that
// needs one to reach its archive still works.
std::vector<std::string> ToolEnv() {
  std::vector<std::string> env = base::ToolEnvironment();
  env.insert(env.end(),
             {"HOME=/root", "DEBIAN_FRONTEND=noninteractive", "DEBCONF_NONINTERACTIVE_SEEN=true"});
  for (const char* name :
       {"http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"}) {
    if (const char* v = std::getenv(name); v != nullptr) env.push_back(std::string(name) + "=" + v);
  }
  return env;
}

base::Command Tool(const StepContext& ctx, std::vector<std::string> argv) {
  base::Command command(std::move(argv));
  command.env = ToolEnv();
  if (ctx.lock_fd >= 0) command.fds.emplace_back(ctx.lock_fd, 3);
  return command;
}

Status RunTool(const StepContext& ctx, std::vector<std::string> argv, OutputSummarizer& summarizer,
               const std::string& what) {
  base::RunOptions options;
  options.timeout = kToolTimeout;
  options.capture_stdout = false;
  options.on_line = [&](const std::string& line) { summarizer.OnLine(line); };
  auto result = base::Run(Tool(ctx, std::move(argv)), options);
  if (!result.ok()) return result.status().WithContext(what);
  if (!result->ok()) return Unavailable(what + ": " + result->program + " " + result->Describe());
  return Status::Ok();
}

// Writes a file inside the tree. Unlinks first and refuses to follow a symlink, so a link in
// the tree (say etc/hostname -> /etc/hostname) can never redirect the write onto the host.
Status WriteTreeFile(const std::string& rootfs, const std::string& rel, const std::string& data,
                     mode_t mode = 0644) {
  std::string path = rootfs + "/" + rel;
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return base::ErrnoStatus("unlink " + path);
  base::UniqueFd fd(
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
  if (!fd.valid()) return base::ErrnoStatus("create " + path);
  RETURN_IF_ERROR(base::WriteAll(fd.get(), data).WithContext("write " + path));
  if (::fchmod(fd.get(), mode) != 0) return base::ErrnoStatus("chmod " + path);
  return Status::Ok();
}

Status RemoveChildrenExcept(const std::string& dir, const std::vector<std::string>& keep) {
  for (const std::string& name : base::ListDirectory(dir)) {
    if (std::find(keep.begin(), keep.end(), name) != keep.end()) continue;
    RETURN_IF_ERROR(base::RemoveTree(dir + "/" + name));
  }
  return Status::Ok();
}

std::string FirstWord(const std::string& s) { return s.substr(0, s.find(' ')); }

}  // namespace

void OutputSummarizer::OnLine(const std::string& line) {
  // apt in a chroot without /dev/pts says this for every run; it only loses apt's term.log.
  if (line.find("Can not write log") != std::string::npos) return;
  if (line.starts_with("E: ") || line.starts_with("W: ")) {
    say_(tool_ + ": " + line);
    return;
  }
  std::string phase, item;
  if (!classify_(line, &phase, &item)) return;
  double now = NowSeconds();
  if (phase != phase_) {
    phase_ = phase;
    count_ = 0;
    last_emit_ = now;
    say_(tool_ + ": " + phase + (item.empty() ? "" : " " + item + " ..."));
  } else if (!item.empty() && now - last_emit_ >= kProgressEverySeconds) {
    last_emit_ = now;
    say_(tool_ + ": " + phase + " (" + std::to_string(count_ + 1) + " so far, " + item + ")");
  }
  ++count_;
}

bool ClassifyDebootstrapLine(const std::string& line, std::string* phase, std::string* item) {
  if (!line.starts_with("I: ")) return false;  // wget and dpkg chatter
  std::string rest = line.substr(3);
  std::string verb = FirstWord(rest);
  std::string arg = rest.size() > verb.size() ? rest.substr(verb.size() + 1) : "";
  while (!arg.empty() && (arg.back() == '.' || arg.back() == ' ')) arg.pop_back();
  *item = FirstWord(arg);
  // "Unpacking required packages...", "Configuring the base system...": a stage, no item.
  if (arg.ends_with("packages") || arg.ends_with("system")) item->clear();
  if (verb == "Retrieving" || verb == "Validating") {
    *phase = "retrieving packages";
  } else if (verb == "Extracting") {
    *phase = "extracting";
  } else if (verb == "Unpacking") {
    *phase = "unpacking";
  } else if (verb == "Configuring") {
    *phase = "configuring";
  } else if (verb == "Resolving") {
    *phase = "resolving dependencies";
    item->clear();
  } else if (verb == "Installing") {
    *phase = "installing core packages";
    item->clear();
  } else {
    return false;
  }
  return true;
}

bool ClassifyAptLine(const std::string& line, std::string* phase, std::string* item) {
  std::istringstream words(line);
  std::vector<std::string> w;
  for (std::string x; words >> x;) w.push_back(x);
  if (w.size() >= 5 && w[0].starts_with("Get:")) {  // Get:3 URI SUITE/COMP ARCH PKG VERSION
    *phase = "downloading";
    *item = w[4];
  } else if (w.size() >= 2 && w[0] == "Unpacking") {
    *phase = "unpacking";
    *item = w[1];
  } else if (w.size() >= 3 && w[0] == "Setting" && w[1] == "up") {
    *phase = "configuring";
    *item = w[2];
  } else {
    return false;
  }
  if (size_t colon = item->find(':'); colon != std::string::npos) item->resize(colon);
  return true;
}

Status RunDebootstrap(const StepContext& ctx, const Recipe& recipe) {
  OutputSummarizer summarizer("debootstrap", ClassifyDebootstrapLine, ctx.say);
  return RunTool(ctx,
                 {ctx.debootstrap, "--variant=minbase", "--components=main", recipe.suite,
                  ctx.rootfs, ctx.mirror},
                 summarizer, "debootstrap");
}

Status InstallPackages(const StepContext& ctx, const Recipe& recipe) {
  std::string list;
  for (const std::string& p : recipe.packages) list += (list.empty() ? "" : " ") + p;
  ctx.say("installing " + list + " ...");
  // policy-rc.d 101 keeps package scripts from starting services in the chroot; the host's
  // resolv.conf lets apt reach the archive. Both go away before the image is sealed.
  RETURN_IF_ERROR(WriteTreeFile(ctx.rootfs, "usr/sbin/policy-rc.d", "#!/bin/sh\nexit 101\n", 0755));
  auto resolv = base::ReadFile("/etc/resolv.conf");
  RETURN_IF_ERROR(WriteTreeFile(ctx.rootfs, "etc/resolv.conf", resolv.ok() ? *resolv : ""));
  std::vector<std::string> argv = {
      ctx.chroot, ctx.rootfs, "apt-get", "install", "-y", "-q", "--no-install-recommends"};
  argv.insert(argv.end(), recipe.packages.begin(), recipe.packages.end());
  OutputSummarizer summarizer("apt-get", ClassifyAptLine, ctx.say);
  Status st = RunTool(ctx, argv, summarizer, "install packages");
  ::unlink((ctx.rootfs + "/usr/sbin/policy-rc.d").c_str());
  ::unlink((ctx.rootfs + "/etc/resolv.conf").c_str());
  return st;
}

Status AddBoxUser(const StepContext& ctx) {
  ctx.say("adding the user " + std::string(kBoxUserName) + " (" + std::to_string(kBoxUserId) + ")");
  const std::string id = std::to_string(kBoxUserId);
  // useradd comes with passwd, which minbase holds (Priority: required).
  OutputSummarizer summarizer("useradd", ClassifyAptLine, ctx.say);
  return RunTool(ctx,
                 {ctx.chroot, ctx.rootfs, "useradd", "--uid", id, "--user-group", "--create-home",
                  "--shell", "/bin/bash", std::string(kBoxUserName)},
                 summarizer, "add the user " + std::string(kBoxUserName));
}

StatusOr<std::vector<std::pair<std::string, std::string>>> QueryPackages(const StepContext& ctx) {
  base::RunOptions options;
  options.timeout = std::chrono::minutes(2);
  auto result = base::Run(Tool(ctx, {"dpkg-query", "--admindir=" + ctx.rootfs + "/var/lib/dpkg",
                                     "-W", "-f=${db:Status-Abbrev}\t${Package}\t${Version}\n"}),
                          options);
  if (!result.ok()) return result.status().WithContext("list packages");
  if (!result->ok()) return Unavailable("list packages: dpkg-query " + result->Describe());
  if (result->out_truncated) return Unavailable("list packages: dpkg-query wrote too much");
  std::vector<std::pair<std::string, std::string>> packages;
  std::istringstream in(result->out);
  for (std::string line; std::getline(in, line);) {
    size_t t1 = line.find('\t');
    size_t t2 = line.find('\t', t1 + 1);
    if (t1 == std::string::npos || t2 == std::string::npos) continue;
    if (!line.starts_with("ii")) continue;  // only packages installed and configured
    packages.emplace_back(line.substr(t1 + 1, t2 - t1 - 1), line.substr(t2 + 1));
  }
  std::sort(packages.begin(), packages.end());
  if (packages.empty()) return Unavailable("list packages: dpkg-query found no installed packages");
  return packages;
}

Status StripTree(const std::string& rootfs) {
  RETURN_IF_ERROR(RemoveChildrenExcept(rootfs + "/var/lib/apt/lists", {"partial", "lock"}));
  RETURN_IF_ERROR(RemoveChildrenExcept(rootfs + "/var/lib/apt/lists/partial", {}));
  RETURN_IF_ERROR(RemoveChildrenExcept(rootfs + "/var/cache/apt/archives", {"partial", "lock"}));
  RETURN_IF_ERROR(RemoveChildrenExcept(rootfs + "/var/cache/apt/archives/partial", {}));
  for (const std::string& name : base::ListDirectory(rootfs + "/var/cache/apt")) {
    if (name.ends_with(".bin"))
      RETURN_IF_ERROR(base::RemoveTree(rootfs + "/var/cache/apt/" + name));
  }
  // Documentation goes, licences stay: usr/share/doc/PKG/copyright is kept.
  std::string doc = rootfs + "/usr/share/doc";
  for (const std::string& pkg : base::ListDirectory(doc)) {
    struct stat st;
    if (::lstat((doc + "/" + pkg).c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      RETURN_IF_ERROR(RemoveChildrenExcept(doc + "/" + pkg, {"copyright"}));
    } else {
      RETURN_IF_ERROR(base::RemoveTree(doc + "/" + pkg));
    }
  }
  for (const char* dir : {"usr/share/man", "usr/share/info", "usr/share/lintian", "usr/share/linda",
                          "var/log", "tmp", "var/tmp"}) {
    RETURN_IF_ERROR(RemoveChildrenExcept(rootfs + "/" + dir, {}));
  }
  // Message catalogs: the box speaks C/C.UTF-8 only.
  RETURN_IF_ERROR(RemoveChildrenExcept(rootfs + "/usr/share/locale", {"locale.alias"}));
  for (const char* file :
       {"var/cache/debconf/config.dat-old", "var/cache/debconf/templates.dat-old",
        "var/lib/dpkg/status-old", "var/lib/dpkg/diversions-old", "etc/machine-id"}) {
    ::unlink((rootfs + "/" + file).c_str());
  }
  return Status::Ok();
}

Status FinishTree(const std::string& rootfs) {
  // An OCI image's tree came from hostile layers: every step works on fds of the tree and
  // never follows a symlink in it (say etc -> /etc, or .codebox -> /usr/bin on the host).
  base::UniqueFd root(::open(rootfs.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!root.valid()) return base::ErrnoStatus("open " + rootfs);
  // Mount points the drivers use, real directories whatever the tree had there.
  for (const char* dir : {"work", ".codebox", "tmp", "root", "data", "etc", "var"}) {
    RETURN_IF_ERROR(EnsureTreeDir(root.get(), dir, 0755).WithContext("finish " + rootfs));
  }
  base::UniqueFd var(::openat(root.get(), "var", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!var.valid()) return base::ErrnoStatus("open " + rootfs + "/var");
  RETURN_IF_ERROR(EnsureTreeDir(var.get(), "tmp", 01777).WithContext("finish " + rootfs));
  base::UniqueFd etc(::openat(root.get(), "etc", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!etc.valid()) return base::ErrnoStatus("open " + rootfs + "/etc");
  for (const auto& [name, data] : {std::pair<const char*, const char*>{"hostname", "codebox\n"},
                                   {"hosts",
                                    "127.0.0.1\tlocalhost codebox\n::1\tlocalhost "
                                    "ip6-localhost\n"}}) {
    if (::unlinkat(etc.get(), name, 0) != 0 && errno != ENOENT)
      return base::ErrnoStatus(std::string("unlink etc/") + name);
    base::UniqueFd fd(
        ::openat(etc.get(), name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (!fd.valid()) return base::ErrnoStatus(std::string("create etc/") + name);
    RETURN_IF_ERROR(base::WriteAll(fd.get(), data));
    if (::fchmod(fd.get(), 0644) != 0) return base::ErrnoStatus(std::string("chmod etc/") + name);
  }
  return Status::Ok();
}

}  // namespace codebox::image
