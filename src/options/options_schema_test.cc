#include <gtest/gtest.h>

#include <cmath>

#include "codebox/option_schema.h"
#include "options/options_json.h"

namespace codebox {
namespace {

// A valid value, different from the default, for every option of both schemas (in the
// option's unit). A new option without one fails here, so it cannot go untested.
OptionValue SampleOf(const OptionSpec& spec) {
  // Not open: all samples together make one valid box, and open refuses allow_hosts.
  if (spec.name == "network") return "allow";
  switch (spec.type) {
    case OptionType::kBool:
      return true;
    case OptionType::kInteger:
    case OptionType::kSize:
      return static_cast<int64_t>(spec.min > 0 ? spec.min * 2 : 4096);
    case OptionType::kNumber:
      return 2.5;
    case OptionType::kDuration:
      return 2.5;
    case OptionType::kChoice:
      return std::string(spec.choices.back());
    case OptionType::kEnvironment:
      return OptionValue::Environment{{"A", "1"}, {"B", "x y"}};
    case OptionType::kData:
      return "some input";
    case OptionType::kList:
      if (spec.name == "secrets") return OptionValue::List{"KEY=v@lue=1@api.example.org,*.x.org"};
      return OptionValue::List{"example.org", "*.example.net:8443", "10.0.0.5"};
    case OptionType::kString:
      break;
  }
  if (spec.name == "image") return "img-1";
  if (spec.name == "workdir") return "/w";
  if (spec.name == "home") return "/tmp/codebox-home";
  if (spec.name == "cwd") return "sub";
  if (spec.name == "user") return "user";
  if (spec.name == "server") return "unix:/run/codebox-test.sock";
  if (spec.name == "server_token") return "secret-1";
  ADD_FAILURE() << "no sample value for option " << spec.name << "; add one to SampleOf";
  return OptionValue();
}

// A value of a kind the option never takes.
OptionValue WrongKindFor(const OptionSpec& spec) {
  if (spec.type == OptionType::kEnvironment) return 3;
  return OptionValue::Environment{{"X", "1"}};
}

TEST(OptionSchemaTest, EveryBoxOptionIsSettableByNameFlagAndEachAlias) {
  for (const OptionSpec& spec : BoxOptionSchema()) {
    const OptionValue sample = SampleOf(spec);
    ASSERT_NE(GetBoxOption(BoxOptions{}, spec.name), sample)
        << spec.name << " sample is the default";
    BoxOptions o;
    ASSERT_TRUE(SetBoxOption(&o, spec.name, sample).ok()) << spec.name;
    EXPECT_EQ(GetBoxOption(o, spec.name), sample) << spec.name;
    EXPECT_TRUE(o.Validate().ok()) << spec.name << ": " << o.Validate().message();
    BoxOptions by_flag;
    ASSERT_TRUE(SetBoxOption(&by_flag, spec.Flag(), sample).ok()) << spec.Flag();
    EXPECT_EQ(GetBoxOption(by_flag, spec.name), sample) << spec.Flag();
    for (const OptionAlias& alias : spec.aliases) {
      OptionValue in_alias_unit = sample;
      if (alias.scale != 1) in_alias_unit = sample.as_number() / alias.scale;
      BoxOptions by_alias;
      Status st = SetBoxOption(&by_alias, alias.name, in_alias_unit);
      ASSERT_TRUE(st.ok()) << alias.name << ": " << st.message();
      const OptionValue got = GetBoxOption(by_alias, spec.name);
      if (alias.scale != 1) {
        EXPECT_EQ(got.as_number(), sample.as_number()) << alias.name;
      } else {
        EXPECT_EQ(got, sample) << alias.name;
      }
    }
  }
}

TEST(OptionSchemaTest, EveryExecOptionIsSettableByNameAndEachAlias) {
  for (const OptionSpec& spec : ExecOptionSchema()) {
    const OptionValue sample = SampleOf(spec);
    for (std::string_view name :
         {spec.name, spec.aliases.empty() ? spec.name : spec.aliases[0].name}) {
      ExecOptions o;
      ASSERT_TRUE(SetExecOption(&o, name, sample).ok()) << name;
      EXPECT_EQ(GetExecOption(o, spec.name), sample) << name;
    }
  }
}

TEST(OptionSchemaTest, BoundsAreCheckedAndNameTheOptionAsGiven) {
  for (const OptionSpec& spec : BoxOptionSchema()) {
    if (!spec.has_bounds) continue;
    BoxOptions o;
    const OptionValue before = GetBoxOption(o, spec.name);
    const double below = spec.min_exclusive ? spec.min : spec.min / 2 - 1;
    Status low = SetBoxOption(&o, spec.name, below);
    ASSERT_FALSE(low.ok()) << spec.name << " took " << below;
    EXPECT_EQ(low.message().rfind(std::string(spec.name) + ": must be", 0), 0u) << low.message();
    Status high = SetBoxOption(&o, spec.name, spec.max * 2);
    ASSERT_FALSE(high.ok()) << spec.name;
    EXPECT_NE(high.message().find("at most"), std::string::npos) << high.message();
    EXPECT_EQ(GetBoxOption(o, spec.name), before) << "a refused value changed " << spec.name;
    for (const OptionAlias& alias : spec.aliases) {
      Status st = SetBoxOption(&o, alias.name, spec.max * 2);
      EXPECT_EQ(st.message().rfind(std::string(alias.name) + ": ", 0), 0u) << st.message();
    }
  }
  BoxOptions o;
  EXPECT_EQ(SetBoxOption(&o, "pids", 0, "--pids").message(), "--pids: must be at least 1, got 0");
  EXPECT_EQ(SetBoxOption(&o, "memory_mib", 48.5).message(),
            "memory_mib: must be a whole number of MiB, got 48.5");
  EXPECT_NE(SetBoxOption(&o, "cpus", 0).message().find("more than 0"), std::string::npos);
}

TEST(OptionSchemaTest, WrongKindsAreErrorsNamingTheOption) {
  for (const OptionSchema* schema : {&BoxOptionSchema(), &ExecOptionSchema()}) {
    for (const OptionSpec& spec : *schema) {
      Status st = CheckOptionKind(spec, WrongKindFor(spec), spec.name);
      ASSERT_FALSE(st.ok()) << spec.name;
      EXPECT_EQ(st.message().rfind(std::string(spec.name) + ": must be ", 0), 0u) << st.message();
    }
  }
  BoxOptions o;
  EXPECT_EQ(SetBoxOption(&o, "memory_mib", "512").message(),
            "memory_mib: must be a number of MiB, got string '512'");
  EXPECT_FALSE(SetBoxOption(&o, "prestart", 1).ok());
  EXPECT_FALSE(SetBoxOption(&o, "exec_timeout", "soon").ok());
}

TEST(OptionSchemaTest, NullIsTheDefaultAndTimeoutsTakeNone) {
  BoxOptions o;
  ASSERT_TRUE(SetBoxOption(&o, "memory_mib", 64).ok());
  ASSERT_TRUE(SetBoxOption(&o, "memory_mib", OptionValue()).ok());
  EXPECT_EQ(o.memory_mib, BoxOptions{}.memory_mib);
  ASSERT_TRUE(SetBoxOption(&o, "cpus", OptionValue()).ok());
  EXPECT_EQ(o.cpus, BoxOptions{}.cpus);
  // The box's timeouts: null is an explicit "no limit" (CodeBox(timeout=None)), as are
  // "none" and infinity; 0 never is.
  for (const OptionValue& none : {OptionValue(), OptionValue("none"), OptionValue(INFINITY)}) {
    o.exec_timeout = std::chrono::seconds(5);
    ASSERT_TRUE(SetBoxOption(&o, "timeout", none).ok());
    EXPECT_EQ(o.exec_timeout, kNoTimeout);
  }
  EXPECT_FALSE(SetBoxOption(&o, "timeout", 0).ok());
  EXPECT_EQ(SetBoxOption(&o, "timeout", 0.0004)
                .message()
                .find("timeout: must be at least 1 ms (at least 0.001 s), got 0.0004 s"),
            0u);
  ASSERT_TRUE(SetBoxOption(&o, "box_timeout", 0.5).ok());
  EXPECT_EQ(o.box_timeout.count(), 500);
  // An exec's timeout: null is "the box's", none is no limit.
  ExecOptions e;
  ASSERT_TRUE(SetExecOption(&e, "timeout", 1.5).ok());
  EXPECT_EQ(e.timeout->count(), 1500);
  ASSERT_TRUE(SetExecOption(&e, "timeout", OptionValue()).ok());
  EXPECT_FALSE(e.timeout.has_value());
  ASSERT_TRUE(SetExecOption(&e, "timeout", "none").ok());
  EXPECT_EQ(*e.timeout, kNoTimeout);
}

TEST(OptionSchemaTest, AliasesInOtherUnitsAndEnvironmentForms) {
  BoxOptions o;
  ASSERT_TRUE(SetBoxOption(&o, "disk_size_gb", 2).ok());
  EXPECT_EQ(o.disk_mib, 2048u);
  ASSERT_TRUE(SetBoxOption(&o, "disk_size_gb", 0.5).ok());
  EXPECT_EQ(o.disk_mib, 512u);
  ASSERT_TRUE(SetBoxOption(&o, "working_dir", "/srv").ok());
  EXPECT_EQ(o.workdir, "/srv");
  EXPECT_NE(
      SetBoxOption(&o, "working_dir", "srv").message().find("working_dir: must be an absolute"),
      std::string::npos);
  ASSERT_TRUE(SetBoxOption(&o, "env", OptionValue::Environment{{"K", "V"}}).ok());
  EXPECT_EQ(o.env, (std::map<std::string, std::string>{{"K", "V"}}));
  Status twice = SetBoxOption(&o, "env", OptionValue::Environment{{"K", "1"}, {"K", "2"}});
  EXPECT_NE(twice.message().find("env: variable K is given twice"), std::string::npos);
  Status bad = SetBoxOption(&o, "env", OptionValue::Environment{{"A=B", "1"}});
  EXPECT_EQ(bad.message().rfind("env: environment variable name", 0), 0u) << bad.message();
  EXPECT_EQ(SetBoxOption(&o, "driver", "docker").message().rfind("driver: unknown driver", 0), 0u);
}

TEST(OptionSchemaTest, UnknownNamesSuggestTheClosest) {
  BoxOptions o;
  EXPECT_EQ(SetBoxOption(&o, "memroy_mib", 1).message(),
            "unknown option 'memroy_mib'; did you mean 'memory_mib'?");
  EXPECT_EQ(UnknownOptionError(BoxOptionSchema(), "--max-open-file", "flag").message(),
            "unknown flag --max-open-file; did you mean --max-open-files?");
  EXPECT_NE(SetBoxOption(&o, "workin_dir", "/").message().find("did you mean 'working_dir'?"),
            std::string::npos);
  Status far = SetBoxOption(&o, "zzzzzz", 1);
  EXPECT_NE(far.message().find("valid: image, driver"), std::string::npos) << far.message();
  ExecOptions e;
  EXPECT_NE(SetExecOption(&e, "stdn", "x").message().find("did you mean 'stdin'?"),
            std::string::npos);
}

TEST(OptionSchemaTest, JsonRoundTripsEveryOption) {
  BoxOptions o;
  for (const OptionSpec& spec : BoxOptionSchema())
    ASSERT_TRUE(SetBoxOption(&o, spec.name, SampleOf(spec)).ok());
  nlohmann::json j = options::BoxOptionsToJson(o);
  EXPECT_EQ(j.size(), BoxOptionSchema().size());
  EXPECT_EQ(j["memory_mib"], 64);
  EXPECT_EQ(j["env"]["B"], "x y");
  auto back = options::BoxOptionsFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(options::BoxOptionsToJson(*back), j);
  auto defaults = options::BoxOptionsFromJson(options::BoxOptionsToJson(BoxOptions{}));
  ASSERT_TRUE(defaults.ok()) << defaults.status().message();
  EXPECT_EQ(defaults->exec_timeout, BoxOptions{}.exec_timeout);
  EXPECT_EQ(defaults->box_timeout, kNoTimeout);

  ExecOptions e;
  for (const OptionSpec& spec : ExecOptionSchema())
    ASSERT_TRUE(SetExecOption(&e, spec.name, SampleOf(spec)).ok());
  auto exec_back = options::ExecOptionsFromJson(options::ExecOptionsToJson(e));
  ASSERT_TRUE(exec_back.ok());
  EXPECT_EQ(options::ExecOptionsToJson(*exec_back), options::ExecOptionsToJson(e));
}

TEST(OptionSchemaTest, JsonTakesAliasesAndPairListsAndRefusesTheUnknown) {
  auto o = options::BoxOptionsFromJson(nlohmann::json::parse(
      R"({"memory": 1024, "timeout": null, "env": [["A", "1"]], "working_dir": "/x"})"));
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->memory_mib, 1024u);
  EXPECT_EQ(o->exec_timeout, kNoTimeout);
  EXPECT_EQ(o->env.at("A"), "1");
  EXPECT_EQ(o->workdir, "/x");
  auto unknown = options::BoxOptionsFromJson(nlohmann::json::parse(R"({"memroy_mib": 1})"));
  EXPECT_NE(unknown.status().message().find("did you mean 'memory_mib'?"), std::string::npos);
  auto bad = options::BoxOptionsFromJson(nlohmann::json::parse(R"({"env": {"A": 1}})"));
  EXPECT_EQ(bad.status().message(), "env: the value of A must be a string, got number");
  EXPECT_FALSE(options::BoxOptionsFromJson(nlohmann::json::array()).ok());
}

TEST(OptionSchemaTest, NetworkOptionsTakeModesListsAndCheckEachHost) {
  BoxOptions o;
  ASSERT_TRUE(
      SetBoxOption(&o, "--allow-host", OptionValue::List{"pypi.org", "*.example.org:8443"}).ok());
  EXPECT_EQ(o.allow_hosts, (std::vector<std::string>{"pypi.org", "*.example.org:8443"}));
  EXPECT_EQ(EffectiveNetwork(o), NetworkMode::kAllow);  // allow_hosts implies allow
  EXPECT_EQ(GetBoxOption(o, "network"), OptionValue("none"));
  Status bad = SetBoxOption(&o, "allow_hosts", OptionValue::List{"ok.org", "bad host"});
  EXPECT_EQ(bad.message().rfind("allow_hosts: allowlist entry 'bad host'", 0), 0u) << bad.message();
  EXPECT_EQ(o.allow_hosts.size(), 2u) << "a refused list changed the options";
  EXPECT_EQ(SetBoxOption(&o, "allow_hosts", "pypi.org").message(),
            "allow_hosts: must be a list of strings, got string 'pypi.org'");
  EXPECT_NE(SetBoxOption(&o, "allow_hosts", OptionValue::List(257, "a.org"))
                .message()
                .find("at most 256 entries"),
            std::string::npos);
  EXPECT_NE(SetBoxOption(&o, "network", "wide").message().find("network: network 'wide' is not"),
            std::string::npos);
  ASSERT_TRUE(SetBoxOption(&o, "network", "open").ok());
  EXPECT_EQ(o.network, NetworkMode::kOpen);
  EXPECT_NE(o.Validate().message().find("allow_hosts: given with network open"), std::string::npos);
  o.allow_hosts.clear();
  EXPECT_TRUE(o.Validate().ok());
  ASSERT_TRUE(SetBoxOption(&o, "network_rate_bytes", 0).ok());
  EXPECT_FALSE(SetBoxOption(&o, "network_max_bytes", 0).ok());

  // JSON: a list of strings; the spec decides, so an empty array is an empty list.
  auto j = options::BoxOptionsFromJson(
      nlohmann::json::parse(R"({"allow_hosts": ["a.org", "10.0.0.5:8080"], "network": "allow"})"));
  ASSERT_TRUE(j.ok()) << j.status().message();
  EXPECT_EQ(j->allow_hosts, (std::vector<std::string>{"a.org", "10.0.0.5:8080"}));
  EXPECT_EQ(options::BoxOptionsToJson(*j)["allow_hosts"],
            nlohmann::json({"a.org", "10.0.0.5:8080"}));
  EXPECT_TRUE(options::BoxOptionsFromJson(nlohmann::json::parse(R"({"allow_hosts": []})")).ok());
  auto not_strings = options::BoxOptionsFromJson(nlohmann::json::parse(R"({"allow_hosts": [1]})"));
  EXPECT_EQ(not_strings.status().message(), "allow_hosts: a list must hold strings, got 1");

  // Two allowlists never share a spare jail, however their entries are cut.
  BoxOptions a, b;
  a.allow_hosts = {"a.org", "b.org"};
  b.allow_hosts = {"a.org, b.org"};
  EXPECT_NE(options::BoxShapeKey(a), options::BoxShapeKey(b));
}

TEST(OptionSchemaTest, SpareKeyChangesWithEveryOptionThatShapesTheBox) {
  const std::string base = options::BoxShapeKey(BoxOptions{});
  for (const OptionSpec& spec : BoxOptionSchema()) {
    BoxOptions o;
    ASSERT_TRUE(SetBoxOption(&o, spec.name, SampleOf(spec)).ok());
    if (spec.shapes_box) {
      EXPECT_NE(options::BoxShapeKey(o), base) << spec.name;
    } else {
      EXPECT_EQ(options::BoxShapeKey(o), base) << spec.name;
    }
  }
  BoxOptions a, b;
  a.workdir = "/a\nmemory_mib 3 512";
  b.workdir = "/a";
  EXPECT_NE(options::BoxShapeKey(a), options::BoxShapeKey(b));
}

TEST(OptionSchemaTest, DefaultsComeFromTheStruct) {
  // BoxOptions stays a plain struct: designated initializers still fill it in.
  BoxOptions designated{.image = "python", .memory_mib = 256};
  EXPECT_EQ(GetBoxOption(designated, "memory_mib"), OptionValue(256));
  ExecOptions exec{.cwd = "sub", .timeout = kNoTimeout};
  EXPECT_EQ(GetExecOption(exec, "timeout"), OptionValue("none"));
  EXPECT_EQ(FormatOptionValue(GetBoxOption(BoxOptions{}, "memory_mib")), "512");
  EXPECT_EQ(FormatOptionValue(GetBoxOption(BoxOptions{}, "exec_timeout")), "30");
  EXPECT_EQ(FormatOptionValue(GetBoxOption(BoxOptions{}, "box_timeout")), "none");
  EXPECT_EQ(FormatOptionValue(GetBoxOption(BoxOptions{}, "driver")), "auto");
  EXPECT_EQ(FormatOptionValue(GetBoxOption(BoxOptions{}, "home")), "\"\"");
}

}  // namespace
}  // namespace codebox
