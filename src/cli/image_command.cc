// codebox image build|ls|rm: builds images from the recipes in images/, lists and removes them.
#include <signal.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "base/paths.h"
#include "base/text.h"
#include "cli/commands.h"
#include "image/store.h"

namespace codebox::cli {
namespace {

constexpr const char kImageUsage[] = R"(usage: codebox image COMMAND [options]

commands:
  build [--force] [NAME...]   build images from their recipes (default: python); an image
                              whose recipe is unchanged is skipped unless --force is given.
                              Needs root (debootstrap).
  ls                          list built images and recipes not built yet
  rm NAME|ID...               remove every build of NAME, or the one build ID

Recipes live in $CODEBOX_IMAGES or share/codebox/images where codebox is installed;
images in $CODEBOX_HOME/images (default /var/lib/codebox for root,
~/.local/share/codebox otherwise).
)";

volatile sig_atomic_t g_interrupted = 0;

// Ctrl-C reaches the whole process group: debootstrap or apt-get dies of it, and the build
// returns an error after removing its temp dir. Catching it here (instead of dying at once)
// is what lets that cleanup run.
void OnInterrupt(int) { g_interrupted = 1; }

bool IsHelp(const std::string& a) { return a == "--help" || a == "-h" || a == "help"; }

int Build(const std::vector<std::string>& args) {
  image::BuildOptions options;
  std::vector<std::string> names;
  for (const std::string& a : args) {
    if (IsHelp(a)) {
      std::fputs(kImageUsage, stdout);
      return 0;
    }
    if (a == "--force" || a == "-f") {
      options.force = true;
    } else if (a.starts_with("-")) {
      std::fprintf(stderr, "codebox image build: unknown option '%s'\n", a.c_str());
      return 2;
    } else {
      names.push_back(a);
    }
  }
  if (names.empty()) names.push_back("python");

  struct sigaction action = {};
  action.sa_handler = OnInterrupt;
  sigemptyset(&action.sa_mask);
  struct sigaction old_action;
  ::sigaction(SIGINT, &action, &old_action);

  std::string home = base::CodeboxHome();
  int rc = 0;
  for (const std::string& name : names) {
    auto recipe = image::LoadRecipe(name);
    if (!recipe.ok()) {
      std::fprintf(stderr, "codebox image build: %s\n", recipe.status().message().c_str());
      rc = 1;
      continue;
    }
    auto built = image::BuildImage(
        home, *recipe,
        [](const std::string& line) {
          std::printf("%s\n", line.c_str());
          std::fflush(stdout);
        },
        options);
    if (g_interrupted && !built.ok()) {
      std::fprintf(stderr,
                   "codebox image build: interrupted; the partial build of %s was removed\n",
                   name.c_str());
      rc = 1;
      break;
    }
    if (!built.ok()) {
      std::fprintf(stderr, "codebox image build %s: %s\n", name.c_str(),
                   built.status().message().c_str());
      rc = 1;
    }
  }
  ::sigaction(SIGINT, &old_action, nullptr);
  return rc;
}

int List(const std::vector<std::string>& args) {
  for (const std::string& a : args) {
    if (IsHelp(a)) {
      std::fputs(kImageUsage, stdout);
      return 0;
    }
    std::fprintf(stderr, "codebox image ls: unexpected argument '%s'\n", a.c_str());
    return 2;
  }
  std::string home = base::CodeboxHome();
  std::map<std::string, std::string> current_ids;  // recipe name -> id its recipe gives now
  for (const std::string& name : image::ListRecipes()) {
    auto recipe = image::LoadRecipe(name);
    current_ids[name] = recipe.ok() ? image::ImageId(*recipe) : "";
  }
  std::vector<image::ImageInfo> images = image::ListImages(home);
  std::printf("%-16s %-16s %9s  %-20s %s\n", "NAME", "ID", "SIZE", "BUILT", "");
  std::map<std::string, bool> built_current;
  for (const image::ImageInfo& info : images) {
    auto it = current_ids.find(info.name);
    const char* note = "";
    if (it == current_ids.end()) {
      note = "(no recipe)";
    } else if (it->second == info.id) {
      built_current[info.name] = true;
    } else {
      note = "(old recipe)";
    }
    std::printf("%-16s %-16s %9s  %-20s %s\n", info.name.c_str(), info.id.c_str(),
                base::FormatSize(info.size_bytes).c_str(), info.built_at.c_str(), note);
  }
  for (const auto& [name, id] : current_ids) {
    if (built_current.count(name) != 0) continue;
    std::string note = "(not built; run: codebox image build " + name + ")";
    std::printf("%-16s %-16s %9s  %-20s %s\n", name.c_str(), "-", "-", "-", note.c_str());
  }
  std::printf("store: %s/images\n", home.c_str());
  return 0;
}

int Remove(const std::vector<std::string>& args) {
  std::vector<std::string> names;
  for (const std::string& a : args) {
    if (IsHelp(a)) {
      std::fputs(kImageUsage, stdout);
      return 0;
    }
    if (a.starts_with("-")) {
      std::fprintf(stderr, "codebox image rm: unknown option '%s'\n", a.c_str());
      return 2;
    }
    names.push_back(a);
  }
  if (names.empty()) {
    std::fputs("codebox image rm: name the image to remove\n", stderr);
    return 2;
  }
  std::string home = base::CodeboxHome();
  int rc = 0;
  for (const std::string& name : names) {
    Status st = image::RemoveImage(home, name);
    if (!st.ok()) {
      std::fprintf(stderr, "codebox image rm: %s\n", st.message().c_str());
      rc = 1;
    } else {
      std::printf("removed %s\n", name.c_str());
    }
  }
  return rc;
}

}  // namespace

int ImageCommand(const std::vector<std::string>& args) {
  if (args.empty()) {
    std::fputs(kImageUsage, stderr);
    return 2;
  }
  std::vector<std::string> rest(args.begin() + 1, args.end());
  const std::string& command = args[0];
  if (IsHelp(command)) {
    std::fputs(kImageUsage, stdout);
    return 0;
  }
  if (command == "build") return Build(rest);
  if (command == "ls" || command == "list") return List(rest);
  if (command == "rm" || command == "remove") return Remove(rest);
  std::fprintf(stderr, "codebox image: unknown command '%s'\n\n%s", command.c_str(), kImageUsage);
  return 2;
}

}  // namespace codebox::cli
