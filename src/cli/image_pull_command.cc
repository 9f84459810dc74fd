// codebox image pull REF / codebox image import FILE: OCI images into the store
// (src/image/oci_import.h does the work; this file reads the flags and prints progress).
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/paths.h"
#include "options/option_text.h"
#include "cli/box_flags.h"
#include "cli/image_commands.h"
#include "image/oci_import.h"

namespace codebox::cli {
namespace {

// The flags pull and import share; one more (--name) for import.
struct OciFlags {
  image::PullOptions options;
  std::string name;
  std::vector<std::string> operands;
};

// "--flag=value" or "--flag value"; nullopt (and an error printed) when the value is missing.
std::optional<std::string> FlagValue(const std::vector<std::string>& args, size_t* i,
                                     const std::string& flag, const char* command) {
  const std::string& a = args[*i];
  if (a.size() > flag.size() && a[flag.size()] == '=') return a.substr(flag.size() + 1);
  if (*i + 1 >= args.size()) {
    std::fprintf(stderr, "codebox image %s: %s needs a value\n", command, flag.c_str());
    return std::nullopt;
  }
  return args[++*i];
}

bool Is(const std::string& a, const char* flag) {
  std::string f = flag;
  return a == f || a.starts_with(f + "=");
}

// Returns 0 to go on, -1 after the help, or the exit status (kExitUsage) to return.
int ParseOciFlags(const std::vector<std::string>& args, const char* command, bool import,
                  OciFlags* flags) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kImageUsage, stdout);
      return -1;
    }
    if (a == "--insecure" && !import) {
      flags->options.insecure = true;
    } else if (a == "--keep-setuid") {
      flags->options.keep_setuid = true;
    } else if (a == "--force" || a == "-f") {
      flags->options.force = true;
    } else if (Is(a, "--creds") && !import) {
      auto v = FlagValue(args, &i, "--creds", command);
      if (!v) return kExitUsage;
      if (v->find(':') == std::string::npos) {
        std::fprintf(stderr, "codebox image %s: --creds takes USER:PASSWORD\n", command);
        return kExitUsage;
      }
      flags->options.creds = *v;
    } else if (Is(a, "--authfile") && !import) {
      auto v = FlagValue(args, &i, "--authfile", command);
      if (!v) return kExitUsage;
      flags->options.authfile = *v;
    } else if (Is(a, "--name") && import) {
      auto v = FlagValue(args, &i, "--name", command);
      if (!v) return kExitUsage;
      flags->name = *v;
    } else if (Is(a, "--max-size")) {
      auto v = FlagValue(args, &i, "--max-size", command);
      if (!v) return kExitUsage;
      auto mib = options::ParseMebibytes(*v);
      if (!mib.ok() || *mib == 0) {
        std::fprintf(stderr, "codebox image %s: --max-size: %s\n", command,
                     mib.ok() ? "give a size from 1M up" : mib.status().message().c_str());
        return kExitUsage;
      }
      flags->options.max_bytes = *mib << 20;
    } else if (a.starts_with("-") && a != "-") {
      std::fprintf(stderr, "codebox image %s: unknown option '%s' (see codebox image --help)\n",
                   command, a.c_str());
      return kExitUsage;
    } else {
      flags->operands.push_back(a);
    }
  }
  if (flags->operands.empty()) {
    std::fprintf(
        stderr, "codebox image %s: name the %s\n", command,
        import ? "file or directory to import" : "image to pull (NAME[:TAG] or NAME@sha256:...)");
    return kExitUsage;
  }
  return 0;
}

void PrintProgress(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

// Pulls or imports each operand into the first store with `one`, saying what failed; stops
// at once (130) when Ctrl-C ended one, after its temp dir is gone.
int ForEachOperand(const char* command, const std::vector<std::string>& operands,
                   const std::function<StatusOr<image::ImageInfo>(
                       const std::string& home, const std::string& operand)>& one) {
  if (::geteuid() == 0) ::umask(022);  // the system store is read by every user
  const std::string home = base::ImageStores().front().path;
  InterruptGuard interrupts;
  int rc = 0;
  for (const std::string& operand : operands) {
    auto done = one(home, operand);
    if (done.ok()) continue;
    if (InterruptGuard::interrupted()) {
      std::fprintf(stderr, "codebox image %s: interrupted; nothing of %s was kept\n", command,
                   operand.c_str());
      return 130;
    }
    std::fprintf(stderr, "codebox image %s %s: %s\n", command, operand.c_str(),
                 done.status().message().c_str());
    rc = kExitCodeboxError;
  }
  return rc;
}

}  // namespace

int ImagePull(const std::vector<std::string>& args) {
  OciFlags flags;
  if (int rc = ParseOciFlags(args, "pull", false, &flags); rc != 0) return rc < 0 ? 0 : rc;
  return ForEachOperand("pull", flags.operands,
                        [&](const std::string& home, const std::string& ref) {
                          return image::PullImage(home, ref, flags.options, PrintProgress);
                        });
}

int ImageImport(const std::vector<std::string>& args) {
  OciFlags flags;
  if (int rc = ParseOciFlags(args, "import", true, &flags); rc != 0) return rc < 0 ? 0 : rc;
  if (flags.operands.size() > 1 && !flags.name.empty()) {
    std::fputs("codebox image import: --name names one image; import one file at a time\n", stderr);
    return kExitUsage;
  }
  return ForEachOperand(
      "import", flags.operands, [&](const std::string& home, const std::string& path) {
        return image::ImportImage(home, path, flags.name, flags.options, PrintProgress);
      });
}

}  // namespace codebox::cli
