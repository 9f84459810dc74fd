#include "image/recipe.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include "base/fs.h"
#include "base/io.h"

namespace codebox::image {
namespace {

TEST(RecipeTest, ParsesKeysCommentsAndPackageLists) {
  auto r = ParseRecipe("python-data",
                       "# a comment\n\n description = Python with data  \n"
                       "packages=python3, python3-numpy\npackages=python3-pandas python3\n"
                       "suite=trixie\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->name, "python-data");
  EXPECT_EQ(r->description, "Python with data");
  EXPECT_EQ(r->suite, "trixie");
  EXPECT_EQ(r->packages, (std::vector<std::string>{"python3", "python3-numpy", "python3-pandas"}));
}

TEST(RecipeTest, DefaultsSuiteToBookworm) {
  auto r = ParseRecipe("x1", "packages=python3\n");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->suite, "bookworm");
}

TEST(RecipeTest, RejectsBadInput) {
  EXPECT_EQ(ParseRecipe("p", "pakages=python3\n").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseRecipe("p", "just words\n").status().code(), StatusCode::kInvalidArgument);
  // A package that would read as an option, or carry shell syntax.
  EXPECT_FALSE(ParseRecipe("p", "packages=--force-yes\n").ok());
  EXPECT_FALSE(ParseRecipe("p", "packages=python3;rm\n").ok());
  EXPECT_FALSE(ParseRecipe("../etc", "packages=python3\n").ok());
  EXPECT_NE(ParseRecipe("p", "oops=1\n").status().message().find("line 1"), std::string::npos);
}

TEST(RecipeTest, ImageNames) {
  EXPECT_TRUE(IsValidImageName("python"));
  EXPECT_TRUE(IsValidImageName("python-data"));
  EXPECT_TRUE(IsValidImageName("py3.11_x"));
  EXPECT_FALSE(IsValidImageName(""));
  EXPECT_FALSE(IsValidImageName(".."));
  EXPECT_FALSE(IsValidImageName("a/b"));
  EXPECT_FALSE(IsValidImageName("Python"));
  EXPECT_FALSE(IsValidImageName("-x"));
  EXPECT_FALSE(IsValidImageName(std::string(65, 'a')));
}

TEST(RecipeTest, IdIsStableAndFollowsTheText) {
  auto a = ParseRecipe("python", "packages=python3\n");
  auto b = ParseRecipe("other", "packages=python3\n");
  auto c = ParseRecipe("python", "packages=python3 \n");
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(ImageId(*a).size(), 16u);
  EXPECT_EQ(ImageId(*a), ImageId(*b));  // the id is of the content, not the name
  EXPECT_NE(ImageId(*a), ImageId(*c));
  // Pinned: a change here means every image in every store gets rebuilt. Bump
  // kBuilderVersion on purpose when the builder's output changes; never by accident.
  EXPECT_EQ(ImageId(*a), "f62821bc48f236a1") << "builder version or id scheme changed";
}

TEST(RecipeTest, LoadsFromCodeboxImages) {
  char tmpl[] = "/tmp/codebox-recipe-test-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  ASSERT_TRUE(base::MakeDirs(dir + "/alpha").ok());
  ASSERT_TRUE(base::MakeDirs(dir + "/beta").ok());
  ASSERT_TRUE(base::MakeDirs(dir + "/not-a-recipe").ok());
  ASSERT_TRUE(base::WriteFile(dir + "/alpha/recipe", "packages=python3\n").ok());
  ASSERT_TRUE(base::WriteFile(dir + "/beta/recipe", "packages=python3-numpy\n").ok());
  ::setenv("CODEBOX_IMAGES", dir.c_str(), 1);
  EXPECT_EQ(RecipeDir(), dir);
  EXPECT_EQ(ListRecipes(), (std::vector<std::string>{"alpha", "beta"}));
  auto alpha = LoadRecipe("alpha");
  ASSERT_TRUE(alpha.ok());
  EXPECT_EQ(alpha->packages, std::vector<std::string>{"python3"});
  auto missing = LoadRecipe("gamma");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("alpha, beta"), std::string::npos)
      << missing.status().message();
  ::unsetenv("CODEBOX_IMAGES");
  ASSERT_TRUE(base::RemoveTree(dir).ok());
}

TEST(RecipeTest, RepositoryRecipesParse) {
  ::unsetenv("CODEBOX_IMAGES");
  for (const char* name : {"python", "python-data"}) {
    auto r = LoadRecipe(name);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_FALSE(r->packages.empty());
    EXPECT_FALSE(r->description.empty());
  }
}

}  // namespace
}  // namespace codebox::image
