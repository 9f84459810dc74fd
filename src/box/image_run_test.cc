#include "box/image_run.h"

#include <gtest/gtest.h>

namespace codebox::box {
namespace {

using protocol::msg::User;

image::ImageConfig AppImage() {
  image::ImageConfig c;
  c.env = {"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "APP=1"};
  c.working_dir = "/srv/app";
  c.user = "app";
  c.uid = 1000;
  c.gid = 1000;
  c.home = "/home/app";
  return c;
}

ImageRun Plan(const BoxOptions& options, const image::ImageConfig& config, bool can = true) {
  auto run = PlanImageRun(options, config, can);
  EXPECT_TRUE(run.ok()) << run.status().ToString();
  return run.ok() ? *run : ImageRun{};
}

TEST(PlanImageRun, ARecipeImageRunsAsBoxesAlwaysDid) {
  BoxOptions options;
  ImageRun run = Plan(options, image::ImageConfig{});
  EXPECT_EQ(run.workdir, "/work");
  EXPECT_EQ(run.cwd, "/work");
  EXPECT_TRUE(run.env.empty());
  EXPECT_EQ(run.user, std::nullopt);
  EXPECT_EQ(run.user_text, "root");
  options.workdir = "/data/w";
  EXPECT_EQ(Plan(options, {}).workdir, "/data/w");
  ImageRun recipe = RecipeRun(options);
  EXPECT_EQ(recipe.workdir, "/data/w");
  EXPECT_EQ(recipe.cwd, "/data/w");
  EXPECT_EQ(BoxEnvironment(options, recipe),
            (std::map<std::string, std::string>{
                {"HOME", "/root"},
                {"LANG", "C.UTF-8"},
                {"MPLBACKEND", "Agg"},
                {"PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
                {"PYTHONUNBUFFERED", "1"}}));
}

TEST(PlanImageRun, TheEnvironmentLayersDefaultsImageNetworkOptions) {
  BoxOptions options;
  options.env = {{"APP", "from-options"}};
  options.network = NetworkMode::kOpen;
  image::ImageConfig config;
  config.env = {"PATH=/opt/img/bin:/usr/bin:/bin",
                "APP=1",
                "LANG=de_DE.UTF-8",
                "HTTP_PROXY=http://image-proxy:1",
                "EMPTY=",
                "EQ=a=b",
                "TWICE=1",
                "TWICE=2"};
  auto env = BoxEnvironment(options, Plan(options, config));
  EXPECT_EQ(env["PATH"], "/opt/img/bin:/usr/bin:/bin") << "the image's PATH, not codebox's";
  EXPECT_EQ(env["LANG"], "de_DE.UTF-8");
  EXPECT_EQ(env["MPLBACKEND"], "Agg") << "a default the image left alone";
  EXPECT_EQ(env["PYTHONUNBUFFERED"], "1") << "output reaches the caller as it is printed";
  EXPECT_EQ(env["HOME"], "/root") << "root's home: the image names no user";
  EXPECT_EQ(env["APP"], "from-options");
  EXPECT_EQ(env["EMPTY"], "");
  EXPECT_EQ(env["EQ"], "a=b");
  EXPECT_EQ(env["TWICE"], "2") << "the image's last entry wins";
  EXPECT_NE(env["HTTP_PROXY"], "http://image-proxy:1") << "the box's proxy is its way out";
}

TEST(PlanImageRun, TheImageUsersHomeUnlessSomeoneNamedOne) {
  BoxOptions options;
  ImageRun run = Plan(options, AppImage());
  EXPECT_EQ(run.user, (User{1000, 1000}));
  EXPECT_EQ(run.user_text, "1000:1000 (app)");
  EXPECT_EQ(BoxEnvironment(options, run)["HOME"], "/home/app");
  image::ImageConfig named = AppImage();
  named.env.push_back("HOME=/srv/home");
  EXPECT_EQ(BoxEnvironment(options, Plan(options, named))["HOME"], "/srv/home");
  options.env["HOME"] = "/tmp/h";
  EXPECT_EQ(BoxEnvironment(options, Plan(options, AppImage()))["HOME"], "/tmp/h");
  image::ImageConfig homeless = AppImage();
  homeless.home = "";
  homeless.user = "1000:1000";
  ImageRun numeric = Plan(BoxOptions{}, homeless);
  EXPECT_EQ(numeric.env["HOME"], "/") << "a user without a passwd entry";
  EXPECT_EQ(numeric.user_text, "1000:1000");
}

TEST(PlanImageRun, WithoutAWayToSwitchTheBoxRunsAsRootAndSaysWhy) {
  BoxOptions options;
  ImageRun run = Plan(options, AppImage(), /*can=*/false);
  EXPECT_EQ(run.user, std::nullopt);
  EXPECT_EQ(run.user_text,
            "root (the image's user 1000:1000 (app) cannot be: a jail without root on the host "
            "maps only one id)");
  EXPECT_EQ(BoxEnvironment(options, run)["HOME"], "/root") << "root's, as it runs as root";
  EXPECT_EQ(run.workdir, "/srv/app") << "the workdir does not depend on the user";
}

TEST(PlanImageRun, AGroupAloneIsAUserToo) {
  image::ImageConfig config;
  config.uid = 0;
  config.gid = 50;
  EXPECT_EQ(Plan(BoxOptions{}, config).user, (User{0, 50}));
  config.gid = 0;
  EXPECT_EQ(Plan(BoxOptions{}, config).user, std::nullopt) << "0:0 is root";
}

TEST(PlanImageRun, TheWorkingDirBecomesTheWorkdirOnlyWhenEmptyAllowedAndNotOverridden) {
  BoxOptions options;
  ImageRun empty = Plan(options, AppImage());
  EXPECT_EQ(empty.workdir, "/srv/app");
  EXPECT_EQ(empty.cwd, "/srv/app");

  image::ImageConfig with_files = AppImage();
  with_files.working_dir_has_files = true;
  ImageRun kept = Plan(options, with_files);
  EXPECT_EQ(kept.workdir, "/work") << "the image's files there stay visible";
  EXPECT_EQ(kept.cwd, "/srv/app");

  for (const char* refused : {"/usr/src/app", "/etc/app", "/", "/proc/x"}) {
    image::ImageConfig c = AppImage();
    c.working_dir = refused;
    ImageRun run = Plan(options, c);
    EXPECT_EQ(run.workdir, "/work") << refused << ": the jail refuses it as a workdir";
    EXPECT_EQ(run.cwd, refused);
  }

  BoxOptions chosen;
  chosen.workdir = "/data/mine";
  ImageRun mine = Plan(chosen, AppImage());
  EXPECT_EQ(mine.workdir, "/data/mine") << "a workdir the caller set wins";
  EXPECT_EQ(mine.cwd, "/data/mine");

  image::ImageConfig none = AppImage();
  none.working_dir = "";
  EXPECT_EQ(Plan(options, none).cwd, "/work");
}

TEST(PlanImageRun, ABadImageEnvironmentOrUserFailsNamingTheImage) {
  BoxOptions options;
  options.image = "docker.io/library/python:3.12-slim";
  auto expect = [&](const image::ImageConfig& config, const std::string& text) {
    auto run = PlanImageRun(options, config, true);
    ASSERT_FALSE(run.ok());
    EXPECT_EQ(run.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(run.status().message().find("image docker.io/library/python:3.12-slim"),
              std::string::npos)
        << run.status().ToString();
    EXPECT_NE(run.status().message().find(text), std::string::npos) << run.status().ToString();
  };
  image::ImageConfig c;
  c.env = {"NOEQUALS"};
  expect(c, "entry 'NOEQUALS' is not NAME=VALUE");
  c.env = {"=value"};
  expect(c, "is not valid");
  c.env = {std::string("A=x\0y", 5)};
  expect(c, "NUL");
  c.env = {"BIG=" + std::string(kMaxArgBytes, 'x')};
  expect(c, "at most");
  c.env = {};
  c.uid = 0xffffffffu;
  expect(c, "4294967295:0 is not a user one can run as");
}

TEST(ExecUser, AnExecRunsAsTheBoxsUserOrAsRootAndNoOneElse) {
  ImageRun run = Plan(BoxOptions{}, AppImage());
  ASSERT_EQ(run.user, (User{1000, 1000}));
  EXPECT_EQ(run.user_name, "app");
  for (const char* box_user : {"", "app", "1000", "1000:1000"}) {
    auto user = ExecUser(run, box_user);
    ASSERT_TRUE(user.ok()) << box_user;
    EXPECT_EQ(*user, (User{1000, 1000})) << box_user;
  }
  for (const char* root : {"root", "0", "0:0"}) {
    auto user = ExecUser(run, root);
    ASSERT_TRUE(user.ok()) << root;
    EXPECT_EQ(*user, (User{0, 0})) << root;
  }
  for (const char* other : {"nobody", "1001", "1000:0", "app:root"}) {
    auto user = ExecUser(run, other);
    ASSERT_FALSE(user.ok()) << other;
    EXPECT_EQ(user.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(user.status().message().find("this box runs as app"), std::string::npos);
  }
  // A root box: root is no switch at all; the user it could not become stays nameable (and is
  // root, as BoxInfo::user says).
  ImageRun root_box = Plan(BoxOptions{}, image::ImageConfig{});
  EXPECT_EQ(*ExecUser(root_box, "root"), std::nullopt);
  EXPECT_FALSE(ExecUser(root_box, "app").ok());
  ImageRun fell_back = Plan(BoxOptions{}, AppImage(), /*can=*/false);
  EXPECT_EQ(*ExecUser(fell_back, "app"), std::nullopt);
}

}  // namespace
}  // namespace codebox::box
