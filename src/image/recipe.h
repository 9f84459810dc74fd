// Recipe files: parsing and the content-addressed image id. See images/README.md for the format.
#ifndef CODEBOX_IMAGE_RECIPE_H_
#define CODEBOX_IMAGE_RECIPE_H_

#include <cstdint>
#include <string>

#include "codebox/status.h"
#include "image/store.h"

namespace codebox::image {

// Bumped whenever the builder would make a different tree from the same recipe (new strip
// rules, new files), so that old images stop matching and get rebuilt.
// 2: every image holds the account kBoxUserName.
inline constexpr char kBuilderVersion[] = "codebox-image-builder 2";

// The unprivileged account every recipe image holds (home /home/user), as E2B's templates
// do: a box asks to run as it with BoxOptions::user.
inline constexpr char kBoxUserName[] = "user";
inline constexpr uint32_t kBoxUserId = 1000;

// Parses a recipe's text. `name` is the recipe's directory name (images/NAME/recipe).
StatusOr<Recipe> ParseRecipe(const std::string& name, const std::string& text);

// True for names usable as a recipe/image name: [a-z0-9][a-z0-9._-]*, at most 64 characters.
// Names become path components, so this is what keeps "../x" out of the store.
bool IsValidImageName(const std::string& name);

}  // namespace codebox::image

#endif  // CODEBOX_IMAGE_RECIPE_H_
