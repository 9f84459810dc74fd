#include "image/recipe.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>

#include "base/io.h"
#include "base/paths.h"
#include "base/sha256.h"

namespace codebox::image {
namespace {

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

// Debian policy 5.6.1: lower case letters, digits, + - . ; at least two characters, starting
// alphanumeric. Checking it also keeps a package from being read as an option ("-x").
bool IsValidPackageName(const std::string& p) {
  if (p.size() < 2 || !(std::islower(static_cast<unsigned char>(p[0])) ||
                        std::isdigit(static_cast<unsigned char>(p[0])))) {
    return false;
  }
  return std::all_of(p.begin(), p.end(), [](char c) {
    return std::islower(static_cast<unsigned char>(c)) ||
           std::isdigit(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.';
  });
}

}  // namespace

bool IsValidImageName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  if (!std::islower(static_cast<unsigned char>(name[0])) &&
      !std::isdigit(static_cast<unsigned char>(name[0]))) {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::islower(static_cast<unsigned char>(c)) ||
           std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

StatusOr<Recipe> ParseRecipe(const std::string& name, const std::string& text) {
  if (!IsValidImageName(name)) {
    return InvalidArgument("bad image name '" + name + "' (use a-z, 0-9, '-', '_', '.')");
  }
  Recipe recipe;
  recipe.name = name;
  recipe.text = text;
  size_t line_no = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = Trim(text.substr(pos, end - pos));
    pos = end + 1;
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    std::string where = "recipe " + name + " line " + std::to_string(line_no);
    size_t eq = line.find('=');
    if (eq == std::string::npos) return InvalidArgument(where + ": expected key=value");
    std::string key = Trim(line.substr(0, eq));
    std::string value = Trim(line.substr(eq + 1));
    if (key == "description") {
      recipe.description = value;
    } else if (key == "suite") {
      if (!IsValidPackageName(value)) return InvalidArgument(where + ": bad suite '" + value + "'");
      recipe.suite = value;
    } else if (key == "packages") {
      for (char& c : value) {
        if (c == ',' || c == '\t') c = ' ';
      }
      size_t p = 0;
      while (p < value.size()) {
        size_t q = value.find(' ', p);
        if (q == std::string::npos) q = value.size();
        std::string pkg = value.substr(p, q - p);
        p = q + 1;
        if (pkg.empty()) continue;
        if (!IsValidPackageName(pkg)) {
          return InvalidArgument(where + ": bad package name '" + pkg + "'");
        }
        if (std::find(recipe.packages.begin(), recipe.packages.end(), pkg) ==
            recipe.packages.end()) {
          recipe.packages.push_back(pkg);
        }
      }
    } else {
      return InvalidArgument(where + ": unknown key '" + key +
                             "' (known: description, packages, suite)");
    }
  }
  return recipe;
}

std::string ImageId(const Recipe& recipe) {
  std::string input = std::string(kBuilderVersion) + "\n" + recipe.text;
  return base::Sha256Hex(input).substr(0, 16);
}

std::string RecipeDir() { return base::FindRecipeDir(); }

std::vector<std::string> ListRecipes() {
  std::vector<std::string> names;
  std::string dir = RecipeDir();
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (struct dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (!IsValidImageName(name)) continue;
    struct stat st;
    if (::stat((dir + "/" + name + "/recipe").c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      names.push_back(name);
    }
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

StatusOr<Recipe> LoadRecipe(const std::string& name) {
  std::string dir = RecipeDir();
  if (!IsValidImageName(name)) {
    return InvalidArgument("bad image name '" + name + "' (use a-z, 0-9, '-', '_', '.')");
  }
  std::string path = dir + "/" + name + "/recipe";
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    std::string known;
    for (const std::string& r : ListRecipes()) known += (known.empty() ? "" : ", ") + r;
    return NotFound("no recipe named '" + name + "' in " + dir +
                    (known.empty() ? " (it holds no recipes)" : " (recipes: " + known + ")"));
  }
  auto text = base::ReadFile(path);
  if (!text.ok()) return text.status().WithContext("read recipe " + name);
  return ParseRecipe(name, *text);
}

}  // namespace codebox::image
