#include "cli/box_flags.h"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "codebox/option_schema.h"

namespace codebox::cli {
namespace {

TEST(BoxFlagsTest, ParsesSizesAndDurations) {
  EXPECT_EQ(*ParseMebibytes("512"), 512u);
  EXPECT_EQ(*ParseMebibytes("2G"), 2048u);
  EXPECT_EQ(*ParseMebibytes("256m"), 256u);
  EXPECT_FALSE(ParseMebibytes("lots").ok());
  EXPECT_EQ(ParseDuration("1.5")->count(), 1500);
  EXPECT_EQ(ParseDuration("500ms")->count(), 500);
  EXPECT_EQ(ParseDuration("2m")->count(), 120000);
  EXPECT_FALSE(ParseDuration("-1").ok());
  // Under 1 ms truncates to 0, which must not silently mean "no limit".
  for (const char* tiny : {"0", "0ms", "0.0004", "0.5ms"}) {
    auto d = ParseDuration(tiny);
    ASSERT_FALSE(d.ok()) << tiny;
    EXPECT_NE(d.status().message().find("at least 1ms"), std::string::npos) << d.status().message();
  }
  EXPECT_EQ(*ParseTimeout("none"), kNoTimeout);
  EXPECT_EQ(ParseTimeout("1ms")->count(), 1);
  auto zero = ParseTimeout("0");
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("none for no limit"), std::string::npos);
}

TEST(BoxFlagsTest, ConsumesBoxFlagsAndLeavesOthers) {
  std::vector<std::string> args = {"--memory",          "1G",    "--env", "A=1", "--driver", "jail",
                                   "--allow-emulation", "--json"};
  BoxOptions options;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    auto r = ParseBoxFlag(args, &i, &options);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    if (!*r) break;
  }
  EXPECT_EQ(args[i], "--json");
  EXPECT_EQ(options.memory_mib, 1024u);
  EXPECT_EQ(options.env.at("A"), "1");
  EXPECT_EQ(options.driver, DriverKind::kJail);
  EXPECT_TRUE(options.allow_emulation);
}

TEST(BoxFlagsTest, BadValuesSayWhichFlag) {
  std::vector<std::string> args = {"--env", "NOVALUE"};
  BoxOptions options;
  size_t i = 0;
  auto r = ParseBoxFlag(args, &i, &options);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--env: wants K=V"), std::string::npos);
  std::vector<std::string> missing = {"--image"};
  i = 0;
  EXPECT_FALSE(ParseBoxFlag(missing, &i, &options).ok());
}

// Flag text for a valid, non-default value of every option, and the value it must give.
struct Sample {
  std::string text;
  OptionValue expected;
};

Sample SampleFor(const OptionSpec& spec) {
  switch (spec.type) {
    case OptionType::kBool:
      return {"", true};  // the bare flag
    case OptionType::kInteger:
      return {std::to_string(static_cast<int64_t>(spec.min) * 2 + 1),
              static_cast<int64_t>(spec.min) * 2 + 1};
    case OptionType::kNumber:
      return {"2.5", 2.5};
    case OptionType::kSize:
      return spec.unit == "MiB" ? Sample{"1G", 1024} : Sample{"3K", 3 * 1024};
    case OptionType::kDuration:
      return {"1500ms", 1.5};
    case OptionType::kChoice:
      return {std::string(spec.choices.back()), std::string(spec.choices.back())};
    case OptionType::kEnvironment:
      return {"K=v=w", OptionValue::Environment{{"K", "v=w"}}};
    case OptionType::kList:
      if (spec.name == "secrets") return {"K=v@example.org", OptionValue::List{"K=v@example.org"}};
      return {"example.org:8080", OptionValue::List{"example.org:8080"}};
    case OptionType::kString:
    case OptionType::kData:
      break;
  }
  if (spec.name == "image") return {"img-2", "img-2"};
  if (spec.name == "workdir" || spec.name == "home") return {"/some/dir", "/some/dir"};
  if (spec.name == "server") return {"unix:/run/x.sock", "unix:/run/x.sock"};
  if (spec.name == "server_token") return {"secret-2", "secret-2"};
  if (spec.name == "user") return {"1000:1000", "1000:1000"};
  ADD_FAILURE() << "no CLI sample for option " << spec.name << "; add one to SampleFor";
  return {"", OptionValue()};
}

StatusOr<BoxOptions> Parse(std::vector<std::string> args) {
  BoxOptions options;
  for (size_t i = 0; i < args.size(); ++i) {
    ASSIGN_OR_RETURN(bool consumed, ParseBoxFlag(args, &i, &options));
    if (!consumed) return InvalidArgument("not a box flag: " + args[i]);
  }
  return options;
}

TEST(BoxFlagsTest, EveryOptionIsSettableByEveryFlagSpelling) {
  for (const OptionSpec& spec : BoxOptionSchema()) {
    const Sample sample = SampleFor(spec);
    ASSERT_NE(GetBoxOption(BoxOptions{}, spec.name), sample.expected) << spec.name;
    std::vector<std::string> flags = {spec.Flag()};
    for (const OptionAlias& alias : spec.aliases) {
      if (alias.scale == 1) flags.push_back(OptionSpec::FlagOf(alias.name));
    }
    for (const std::string& flag : flags) {
      std::vector<std::vector<std::string>> forms = {
          {flag + "=" + (sample.text.empty() ? "true" : sample.text)}};
      forms.push_back(sample.text.empty() ? std::vector<std::string>{flag}
                                          : std::vector<std::string>{flag, sample.text});
      for (const auto& args : forms) {
        auto o = Parse(args);
        ASSERT_TRUE(o.ok()) << args[0] << ": " << o.status().message();
        EXPECT_EQ(GetBoxOption(*o, spec.name), sample.expected) << args[0];
        EXPECT_TRUE(o->Validate().ok()) << args[0];
      }
    }
  }
}

TEST(BoxFlagsTest, FlagsTheOldCliKnewStillWork) {
  auto o = Parse({"--memory",          "2G",    "--pids",  "7",           "--timeout", "none",
                  "--box-timeout",     "2m",    "--disk",  "512M",        "--cpus",    "0.5",
                  "--workdir",         "/w",    "--image", "python-data", "--driver",  "vm",
                  "--allow-emulation", "--env", "A=1",     "--env",       "B=2"});
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->memory_mib, 2048u);
  EXPECT_EQ(o->max_processes, 7u);
  EXPECT_EQ(o->exec_timeout, kNoTimeout);
  EXPECT_EQ(o->box_timeout.count(), 120000);
  EXPECT_EQ(o->disk_mib, 512u);
  EXPECT_EQ(o->cpus, 0.5);
  EXPECT_EQ(o->workdir, "/w");
  EXPECT_EQ(o->image, "python-data");
  EXPECT_EQ(o->driver, DriverKind::kVm);
  EXPECT_TRUE(o->allow_emulation);
  EXPECT_EQ(o->env, (std::map<std::string, std::string>{{"A", "1"}, {"B", "2"}}));
}

TEST(BoxFlagsTest, AllowHostRepeatsAndNetworkFlags) {
  auto o = Parse({"--allow-host", "pypi.org", "--allow-host=*.example.org", "--allow-hosts",
                  "[fd00::1]:8080", "--network", "allow", "--network-max-bytes", "10M",
                  "--network-rate-bytes=1M"});
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->allow_hosts,
            (std::vector<std::string>{"pypi.org", "*.example.org", "[fd00::1]:8080"}));
  EXPECT_EQ(o->network, NetworkMode::kAllow);
  EXPECT_EQ(o->network_max_bytes, 10u << 20);
  EXPECT_EQ(o->network_rate_bytes, 1u << 20);
  auto bad = Parse({"--allow-host", "pypi.org", "--allow-host", "http://pypi.org"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind("--allow-host: allowlist entry 'http://pypi.org'", 0), 0u)
      << bad.status().message();
  EXPECT_NE(BoxFlagsHelp().find("  --allow-host, --allow-hosts HOST"), std::string::npos);
}

TEST(BoxFlagsTest, NewSpellingsAndUnits) {
  auto o = Parse({"--max-open-files", "4096", "--memory-mib=300", "--disk-size-gb", "2",
                  "--output-limit-bytes=1M", "--allow-emulation=false", "--prestart=yes",
                  "--working-dir", "/x", "--exec-timeout", "45"});
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->max_open_files, 4096u);
  EXPECT_EQ(o->memory_mib, 300u);
  EXPECT_EQ(o->disk_mib, 2048u);
  EXPECT_EQ(o->output_limit_bytes, 1u << 20);
  EXPECT_FALSE(o->allow_emulation);
  EXPECT_TRUE(o->prestart);
  EXPECT_EQ(o->workdir, "/x");
  EXPECT_EQ(o->exec_timeout.count(), 45000);
}

TEST(BoxFlagsTest, ErrorsNameTheFlagAsTyped) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  } cases[] = {
      {{"--pids", "0"}, "--pids: must be at least 1, got 0"},
      {{"--max-processes=0"}, "--max-processes: must be at least 1, got 0"},
      {{"--memory", "16M"}, "--memory: must be at least 32 MiB, got 16 MiB"},
      {{"--max-open-files", "8"}, "--max-open-files: must be at least 16, got 8"},
      {{"--cpus", "lots"}, "--cpus: 'lots' is not a non-negative number"},
      {{"--workdir", "rel"}, "--workdir: must be an absolute path inside the box, got 'rel'"},
      {{"--prestart=maybe"}, "--prestart: wants true or false, got 'maybe'"},
      {{"--timeout", "0"},
       "--timeout: '0' is under 1 ms; a duration is at least 1ms (or none for no limit)"},
      {{"--memory"}, "--memory needs a value"},
  };
  for (const Case& c : cases) {
    auto o = Parse(c.args);
    ASSERT_FALSE(o.ok()) << c.args[0];
    EXPECT_EQ(o.status().message(), c.message);
  }
  EXPECT_EQ(BoxFlagHint("--memroy"), "; did you mean --memory?");
  EXPECT_EQ(BoxFlagHint("--max-open-file"), "; did you mean --max-open-files?");
  EXPECT_EQ(BoxFlagHint("--json"), "");
}

// A schema name the CLI user never typed ("max_processes"), if `message` holds one.
std::string FieldNameIn(const std::string& message) {
  for (const OptionSchema* schema : {&BoxOptionSchema(), &ExecOptionSchema()}) {
    for (const OptionSpec& spec : *schema) {
      if (spec.name.find('_') != std::string_view::npos &&
          message.find(spec.name) != std::string::npos) {
        return std::string(spec.name);
      }
    }
  }
  return "";
}

// Texts that some option of `spec`'s type refuses: the wrong kind, and past each bound.
std::vector<std::string> BadTextsFor(const OptionSpec& spec) {
  std::vector<std::string> texts;
  switch (spec.type) {
    case OptionType::kBool:
      texts = {"maybe"};
      break;
    case OptionType::kChoice:
      texts = {"nope"};
      break;
    case OptionType::kEnvironment:
      texts = {"NOVALUE", "=v"};
      break;
    case OptionType::kList:
      texts = {"http://example.org/"};
      break;
    case OptionType::kString:
    case OptionType::kData:
      texts = {"", "relative/dir", "bad name!", "ftp://example.org"};
      break;
    case OptionType::kInteger:
    case OptionType::kNumber:
    case OptionType::kSize:
    case OptionType::kDuration:
      texts = {"lots", "-1"};
      if (spec.has_bounds && spec.min >= 1) texts.push_back(std::to_string(int64_t(spec.min) - 1));
      if (spec.has_bounds) texts.push_back(std::to_string(int64_t(spec.max) * 4 + 4));
      break;
  }
  return texts;
}

TEST(BoxFlagsTest, EveryOptionsBadValueNamesItsFlagNeverItsField) {
  // Options any text is a valid value of (a directory, a token).
  const std::set<std::string_view> takes_any_text = {"home", "server_token"};
  for (const OptionSpec& spec : BoxOptionSchema()) {
    int refused = 0;
    for (const std::string& text : BadTextsFor(spec)) {
      auto o = Parse({spec.Flag() + "=" + text});
      if (o.ok()) {
        // What the flag took must still pass the CLI's whole-struct check, or fail in flags.
        Status st = ValidateForCli(*o);
        if (st.ok()) continue;
        o = st;
      }
      ++refused;
      const std::string& m = o.status().message();
      EXPECT_EQ(m.rfind(spec.Flag(), 0), 0u) << spec.Flag() << "=" << text << ": " << m;
      EXPECT_EQ(FieldNameIn(m), "") << spec.Flag() << "=" << text << ": " << m;
    }
    if (takes_any_text.count(spec.name) == 0) {
      EXPECT_GT(refused, 0) << spec.Flag() << ": no bad value found; add one to BadTextsFor";
    }
  }
}

TEST(BoxFlagsTest, ValidateForCliNamesFlagsWhereValidateNamesFields) {
  struct Case {
    std::string field;  // what Validate names
    std::string flag;   // what the CLI names instead
    std::function<void(BoxOptions*)> spoil;
  } cases[] = {
      {"max_processes", "--max-processes", [](BoxOptions* o) { o->max_processes = 0; }},
      {"memory_mib", "--memory-mib", [](BoxOptions* o) { o->memory_mib = 1; }},
      {"exec_timeout", "--exec-timeout",
       [](BoxOptions* o) { o->exec_timeout = std::chrono::milliseconds(0); }},
      {"workdir", "--workdir", [](BoxOptions* o) { o->workdir = "rel"; }},
      {"allow_hosts", "--allow-host",
       [](BoxOptions* o) {
         o->network = NetworkMode::kOpen;
         o->allow_hosts = {"pypi.org"};
       }},
  };
  for (const Case& c : cases) {
    BoxOptions options;
    c.spoil(&options);
    Status by_field = options.Validate();
    ASSERT_FALSE(by_field.ok()) << c.field;
    EXPECT_EQ(by_field.message().rfind(c.field + ": ", 0), 0u) << by_field.message();
    Status by_flag = ValidateForCli(options);
    ASSERT_FALSE(by_flag.ok()) << c.flag;
    EXPECT_EQ(by_flag.message().rfind(c.flag + ": ", 0), 0u) << by_flag.message();
    EXPECT_EQ(FieldNameIn(by_flag.message()), "") << by_flag.message();
  }
  BoxOptions open_with_hosts;
  open_with_hosts.network = NetworkMode::kOpen;
  open_with_hosts.allow_hosts = {"pypi.org"};
  EXPECT_NE(ValidateForCli(open_with_hosts).message().find("give --network allow"),
            std::string::npos);
  EXPECT_TRUE(ValidateForCli(BoxOptions{}).ok());
}

TEST(BoxFlagsTest, HelpListsEveryFlagWithItsDefault) {
  const std::string help = BoxFlagsHelp();
  for (const OptionSpec& spec : BoxOptionSchema()) {
    EXPECT_NE(help.find("  " + spec.Flag()), std::string::npos) << spec.Flag();
    for (const OptionAlias& alias : spec.aliases) {
      EXPECT_NE(help.find(OptionSpec::FlagOf(alias.name)), std::string::npos) << alias.name;
    }
  }
  EXPECT_NE(help.find("(default 512)"), std::string::npos) << help;
  std::istringstream lines(help);
  for (std::string line; std::getline(lines, line);) EXPECT_LE(line.size(), 100u) << line;
}

TEST(BoxFlagsTest, DocsOptionsMdIsWhatTheSchemaGenerates) {
  const std::string path = std::string(CODEBOX_SOURCE_DIR) + "/docs/options.md";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path
                  << " is missing; make it with: codebox options --markdown > docs/options.md";
  std::stringstream committed;
  committed << in.rdbuf();
  EXPECT_EQ(committed.str(), OptionsMarkdown())
      << path << " is stale; regenerate it with: codebox options --markdown > docs/options.md";
}

}  // namespace
}  // namespace codebox::cli
