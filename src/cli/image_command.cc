// codebox image build|ls|rm: builds images from the recipes in images/, lists and removes them.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "base/paths.h"
#include "base/text.h"
#include "cli/box_flags.h"
#include "cli/commands.h"
#include "cli/image_commands.h"
#include "image/oci_reference.h"
#include "image/store.h"
#include "vm/snapshot.h"

namespace codebox::cli {

const char kImageUsage[] = R"(usage: codebox image COMMAND [options]

commands:
  build [--force] [NAME...]   build images from their recipes (default:
                              python); an image whose recipe is unchanged is
                              skipped unless --force is given. Needs root
                              (debootstrap); root builds into /var/lib/codebox,
                              where every user's boxes find them.
  pull [options] REF...       pull OCI images from a registry: NAME[:TAG] or
                              NAME@sha256:... (python:3.12-slim,
                              ghcr.io/org/app:1); a digest the store has is not
                              fetched again. Needs root.
      --creds USER:PASSWORD   log in to the registry (default: the registry
                              auth file, $REGISTRY_AUTH_FILE or
                              ~/.docker/config.json, if any)
      --authfile FILE         read credentials from FILE
      --insecure              plain HTTP, no TLS checks: only for a registry on
                              this host or at a private address
  import [options] FILE...    import an OCI layout (a directory), an OCI
                              archive or a `docker save` archive. Needs root.
      --name NAME[:TAG]       what boxes ask for (default: the name the archive
                              gives)
  pull and import also take:
      --max-size SIZE         largest image, unpacked (default 16G)
      --keep-setuid           keep setuid/setgid bits (dropped by default)
      --force                 fetch and unpack again even when the store has it
  ls                          list built and pulled images (in every store
                              searched), recipes not built yet, and the vm
                              templates that vm boxes are restored from
  rm NAME|REF|ID...           remove every build of NAME, the image REF, or the
                              one build ID, from your own store
  rm --templates              remove every vm template (the next vm box of
                              each kind boots and saves its template anew)

Recipes live in $CODEBOX_IMAGES or share/codebox/images where codebox is
installed. Stores searched for images: $CODEBOX_HOME alone if set; else
/var/lib/codebox for root; else your own ~/.local/share/codebox (or
$XDG_DATA_HOME/codebox) first, then /var/lib/codebox (read-only for you).
)";

namespace {

volatile sig_atomic_t g_interrupted = 0;
void OnInterrupt(int) { g_interrupted = 1; }

}  // namespace

InterruptGuard::InterruptGuard() {
  struct sigaction action = {};
  action.sa_handler = OnInterrupt;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, &old_);
}

InterruptGuard::~InterruptGuard() { ::sigaction(SIGINT, &old_, nullptr); }

bool InterruptGuard::interrupted() { return g_interrupted != 0; }

namespace {

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
      return kExitUsage;
    } else {
      names.push_back(a);
    }
  }
  if (names.empty()) names.push_back("python");

  InterruptGuard interrupts;
  // Whatever root's umask, the system store's images must be readable by every user.
  if (::geteuid() == 0) ::umask(022);
  const std::vector<base::ImageStore> stores = base::ImageStores();
  const std::string home = stores.front().path;
  int rc = 0;
  for (const std::string& name : names) {
    auto recipe = image::LoadRecipe(name);
    if (!recipe.ok()) {
      std::fprintf(stderr, "codebox image build: %s\n", recipe.status().message().c_str());
      // No such recipe is the user's slip; one that does not load is ours.
      if (rc == 0) {
        rc = recipe.status().code() == StatusCode::kNotFound ? kExitUsage : kExitCodeboxError;
      }
      continue;
    }
    if (::geteuid() != 0) {
      // A non-root user cannot build (debootstrap); an image root built serves them.
      auto found = image::FindImage(stores, name);
      if (found.ok() && !options.force) {
        std::printf("image %s is up to date (%s, in %s)\n", name.c_str(), found->id.c_str(),
                    found->store.c_str());
        continue;
      }
      std::fprintf(stderr, "codebox image build %s: run: %s\n", name.c_str(),
                   image::BuildCommandHint(name, stores, false).c_str());
      rc = kExitCodeboxError;
      continue;
    }
    auto built = image::BuildImage(
        home, *recipe,
        [](const std::string& line) {
          std::printf("%s\n", line.c_str());
          std::fflush(stdout);
        },
        options);
    if (InterruptGuard::interrupted() && !built.ok()) {
      std::fprintf(stderr,
                   "codebox image build: interrupted; the partial build of %s was removed\n",
                   name.c_str());
      rc = kExitCodeboxError;
      break;
    }
    if (!built.ok()) {
      std::fprintf(stderr, "codebox image build %s: %s\n", name.c_str(),
                   built.status().message().c_str());
      rc = kExitCodeboxError;
    }
  }
  return rc;
}

int List(const std::vector<std::string>& args) {
  for (const std::string& a : args) {
    if (IsHelp(a)) {
      std::fputs(kImageUsage, stdout);
      return 0;
    }
    std::fprintf(stderr, "codebox image ls: unexpected argument '%s'\n", a.c_str());
    return kExitUsage;
  }
  const std::vector<base::ImageStore> stores = base::ImageStores();
  std::map<std::string, std::string> current_ids;  // recipe name -> id its recipe gives now
  for (const std::string& name : image::ListRecipes()) {
    auto recipe = image::LoadRecipe(name);
    current_ids[name] = recipe.ok() ? image::ImageId(*recipe) : "";
  }
  struct Row {
    std::string name, id, size, built, store, note;
  };
  std::vector<Row> rows;
  std::map<std::string, bool> built_current;
  for (const image::ImageInfo& info : image::ListImages(stores)) {
    Row r{info.name,
          info.id,
          base::FormatSize(info.size_bytes),
          info.built_at,
          base::StoreKindName(info.store_kind),
          ""};
    if (info.source == "oci") {
      // The reference as the user writes it, and the manifest digest it was pulled at.
      auto ref = image::ParseImageReference(info.reference);
      r.name = ref.ok() ? ref->Familiar() : info.reference;
      r.note = "oci " + info.digest.substr(0, 7 + 12);
      rows.push_back(std::move(r));
      continue;
    }
    auto it = current_ids.find(info.name);
    if (it == current_ids.end()) {
      r.note = "(no recipe)";
    } else if (it->second == info.id) {
      // The first store in search order with a current build is the one boxes use.
      r.note = built_current[info.name] ? "(shadowed by the store above)" : "";
      built_current[info.name] = true;
    } else {
      r.note = "(old recipe)";
    }
    rows.push_back(std::move(r));
  }
  for (const auto& [name, id] : current_ids) {
    if (built_current.count(name) != 0) continue;
    rows.push_back(
        {name, "-", "-", "-", "-",
         "(not built; run: " + image::BuildCommandHint(name, stores, ::geteuid() == 0) + ")"});
  }
  int width = 16;
  for (const Row& r : rows) width = std::max(width, static_cast<int>(r.name.size()));
  auto print = [&](const Row& r) {
    std::printf("%-*s %-16s %9s  %-20s %-8s %s\n", width, r.name.c_str(), r.id.c_str(),
                r.size.c_str(), r.built.c_str(), r.store.c_str(), r.note.c_str());
  };
  print({"NAME", "ID", "SIZE", "BUILT", "STORE", ""});
  for (const Row& r : rows) print(r);
  for (const base::ImageStore& store : stores) {
    std::printf("%s store: %s/images%s\n", base::StoreKindName(store.kind), store.path.c_str(),
                store.kind == base::ImageStore::Kind::kSystem && ::geteuid() != 0
                    ? " (read-only for you)"
                    : "");
  }
  std::vector<vm::TemplateInfo> templates = vm::ListTemplates();
  if (!templates.empty()) {
    std::printf("\nvm templates in %s (a vm box of the same kind is restored from one):\n",
                vm::TemplateRoot().c_str());
    for (const vm::TemplateInfo& t : templates) {
      Status whole = vm::FindTemplate(t.key).status();
      std::printf("  %s  %s, %s, %llu MiB, %u cpu, disk %llu MiB, %s in RAM%s\n", t.key.c_str(),
                  t.image_tree.c_str(), t.accel.c_str(),
                  static_cast<unsigned long long>(t.memory_mib), t.cpus,
                  static_cast<unsigned long long>(t.disk_mib),
                  base::FormatSize(t.memory_bytes_used).c_str(),
                  whole.ok() ? "" : " (damaged: the next box removes it and boots)");
    }
  }
  return 0;
}

int RemoveTemplates() {
  int rc = 0;
  for (const vm::TemplateInfo& t : vm::ListTemplates()) {
    Status st = vm::RemoveTemplate(t.key);
    if (!st.ok()) {
      std::fprintf(stderr, "codebox image rm: vm template %s: %s\n", t.key.c_str(),
                   st.message().c_str());
      rc = kExitCodeboxError;
    } else {
      std::printf("removed vm template %s\n", t.key.c_str());
    }
  }
  return rc;
}

int Remove(const std::vector<std::string>& args) {
  std::vector<std::string> names;
  for (const std::string& a : args) {
    if (IsHelp(a)) {
      std::fputs(kImageUsage, stdout);
      return 0;
    }
    if (a == "--templates") {
      if (args.size() != 1) {
        std::fputs("codebox image rm: --templates takes no image names\n", stderr);
        return kExitUsage;
      }
      return RemoveTemplates();
    }
    if (a.starts_with("-")) {
      std::fprintf(stderr, "codebox image rm: unknown option '%s'\n", a.c_str());
      return kExitUsage;
    }
    names.push_back(a);
  }
  if (names.empty()) {
    std::fputs("codebox image rm: name the image to remove\n", stderr);
    return kExitUsage;
  }
  std::string home = base::CodeboxHome();
  int rc = 0;
  for (const std::string& name : names) {
    Status st = image::RemoveImage(home, name);
    if (st.code() == StatusCode::kNotFound && home != base::kSystemStore) {
      for (const image::ImageInfo& info : image::ListImages(std::string(base::kSystemStore))) {
        if (info.name != name && info.id != name) continue;
        st = NotFound("'" + name + "' is in the system store " + base::kSystemStore + ", not in " +
                      home + "; run: sudo codebox image rm " + name);
        break;
      }
    }
    if (!st.ok()) {
      std::fprintf(stderr, "codebox image rm: %s\n", st.message().c_str());
      rc = kExitCodeboxError;
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
    return kExitUsage;
  }
  std::vector<std::string> rest(args.begin() + 1, args.end());
  const std::string& command = args[0];
  if (IsHelp(command)) {
    std::fputs(kImageUsage, stdout);
    return 0;
  }
  if (command == "build") return Build(rest);
  if (command == "pull") return ImagePull(rest);
  if (command == "import") return ImageImport(rest);
  if (command == "ls" || command == "list") return List(rest);
  if (command == "rm" || command == "remove") return Remove(rest);
  std::fprintf(stderr, "codebox image: unknown command '%s'\n\n%s", command.c_str(), kImageUsage);
  return kExitUsage;
}

}  // namespace codebox::cli
