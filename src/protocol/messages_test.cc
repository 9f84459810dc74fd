#include "protocol/messages.h"

#include <gtest/gtest.h>

#include "protocol/frame.h"

namespace codebox::protocol::msg {
namespace {

template <typename T>
T RoundTripRequest(const T& in) {
  auto out = DecodeRequestPayload(EncodeRequest(in));
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_TRUE(std::holds_alternative<T>(*out));
  return std::get<T>(*out);
}

template <typename T>
T RoundTripEvent(const T& in) {
  auto out = DecodeEventPayload(EncodeEvent(in));
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_TRUE(std::holds_alternative<T>(*out));
  return std::get<T>(*out);
}

template <typename T>
void ExpectError(const StatusOr<T>& r, const std::string& text) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kProtocolError);
  EXPECT_NE(r.status().message().find(text), std::string::npos) << r.status().ToString();
}

TEST(MessagesTest, EveryRequestRoundTrips) {
  Exec e;
  e.argv = {"python3", "-c", "print(1)"};
  e.env = {{"PATH", "/bin"}, {"HOME", "/root"}};
  e.cwd = "/work";
  e.stdin_stream = true;
  e.timeout = std::chrono::milliseconds(30000);
  e.output_limit = 1234;
  Exec e2 = RoundTripRequest(e);
  EXPECT_EQ(e2.argv, e.argv);
  EXPECT_EQ(e2.env, e.env);
  EXPECT_EQ(e2.cwd, "/work");
  EXPECT_TRUE(e2.stdin_stream);
  EXPECT_EQ(e2.timeout, std::chrono::milliseconds(30000));
  // No limit is timeout_ms 0 on the wire (or no field), and kNoTimeout in memory.
  Exec unlimited;
  unlimited.argv = {"true"};
  EXPECT_EQ(RoundTripRequest(unlimited).timeout, kNoTimeout);
  EXPECT_NE(EncodeRequest(unlimited).find("\"timeout_ms\":0"), std::string::npos);
  EXPECT_EQ(e2.output_limit, 1234u);
  WriteFile w = RoundTripRequest(WriteFile{"/a", 0600, true});
  EXPECT_EQ(w.path, "/a");
  EXPECT_EQ(w.mode, 0600u);
  EXPECT_TRUE(w.parents);
  EXPECT_EQ(RoundTripRequest(ReadFile{"/r"}).path, "/r");
  EXPECT_EQ(RoundTripRequest(ListDir{"/l"}).path, "/l");
  EXPECT_EQ(RoundTripRequest(MakeDir{"/m", 0700, false}).mode, 0700u);
  Kill k = RoundTripRequest(Kill{5, 0});
  EXPECT_EQ(k.target, 5u);
  EXPECT_EQ(k.signal, 0);
  RoundTripRequest(Shutdown{});
  RoundTripRequest(AwaitHello{});
  EXPECT_EQ(RoundTripRequest(Remove{"/work/tree"}).path, "/work/tree");
  EXPECT_EQ(RequestName(Request(Remove{"/x"})), "remove");
}

TEST(MessagesTest, EveryEventRoundTrips) {
  Exit x = RoundTripEvent(Exit{-1, 9, true, true, 77, true});
  EXPECT_EQ(x.exit_code, -1);
  EXPECT_EQ(x.signal, 9);
  EXPECT_TRUE(x.timed_out && x.output_truncated && x.out_of_memory);
  EXPECT_EQ(x.duration_ms, 77);
  RoundTripEvent(Done{});
  File f = RoundTripEvent(File{1ull << 40, 0755});
  EXPECT_EQ(f.size, 1ull << 40);
  EXPECT_EQ(f.mode, 0755u);
  Entries en = RoundTripEvent(Entries{{{"a", "file", 3, 0644}, {"b", "dir", 0, 0755}}, true});
  ASSERT_EQ(en.entries.size(), 2u);
  EXPECT_EQ(en.entries[1].type, "dir");
  EXPECT_TRUE(en.more);
  Error er = RoundTripEvent(Error{"not_found", "no /x"});
  EXPECT_EQ(er.code, "not_found");
  EXPECT_EQ(StatusFromError(er).code(), StatusCode::kNotFound);
}

TEST(MessagesTest, HelloBothWays) {
  auto host = DecodeHello(*ParseControl(EncodeHello(Hello{1, "codebox/0.1", "", {}, {}})));
  ASSERT_TRUE(host.ok());
  EXPECT_EQ(host->client, "codebox/0.1");
  auto agent = DecodeHello(*ParseControl(EncodeHello(Hello{1, "", "codebox-agent", 1, {}})));
  ASSERT_TRUE(agent.ok());
  EXPECT_EQ(agent->pid, 1);
  // Open to new fields, so that a newer peer is still told its version differs.
  auto newer = DecodeHello(*ParseControl(R"({"protocol":2,"features":["x"]})"));
  ASSERT_TRUE(newer.ok());
  EXPECT_EQ(newer->protocol, 2);
  EXPECT_FALSE(DecodeHello(*ParseControl(R"({"protocol":"1"})")).ok());
}

TEST(MessagesTest, GuestSetupRoundTripsAndHostileOnesAreErrors) {
  Hello hello{1, "codebox/0.1", "", {}, GuestSetup{}};
  hello.guest->entropy = std::string(kGuestEntropyBytes, '\xa5');
  hello.guest->time_unix_ns = 1'780'000'000'000'000'000;
  hello.guest->resend_hello = true;
  hello.guest->max_processes = 256;
  hello.guest->memory_bytes = 400ll << 20;
  auto back = DecodeHello(*ParseControl(EncodeHello(hello)));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_TRUE(back->guest.has_value());
  EXPECT_EQ(*back->guest, *hello.guest);
  EXPECT_FALSE(DecodeHello(*ParseControl(EncodeHello(Hello{1, "c", "", {}, {}}))).value().guest);

  std::string hex64(2 * kGuestEntropyBytes, 'f');
  auto with = [&](const std::string& guest) {
    return DecodeHello(*ParseControl(R"({"protocol":1,"guest":)" + guest + "}"));
  };
  ExpectError(with("5"), "field \"guest\"");
  ExpectError(with(R"({"entropy":"ab","time_ns":1})"), "field \"entropy\"");
  ExpectError(
      with(R"({"entropy":")" + std::string(2 * kGuestEntropyBytes, 'x') + R"(","time_ns":1})"),
      "field \"entropy\"");
  ExpectError(with(R"({"entropy":")" + hex64 + R"(","time_ns":-1})"), "field \"time_ns\"");
  ExpectError(with(R"({"entropy":")" + hex64 + R"(","time_ns":1,"max_processes":-2})"),
              "field \"max_processes\"");
  ExpectError(with(R"({"entropy":")" + hex64 + R"(","time_ns":1,"extra":1})"),
              "unknown field \"extra\"");
}

TEST(MessagesTest, MistypedFieldsAreErrorsNamingTheField) {
  ExpectError(DecodeEventPayload(R"({"event":5})"), "field \"event\"");
  ExpectError(
      DecodeEventPayload(
          R"({"event":"exit","exit_code":"zero","signal":0,"timed_out":false,"output_truncated":false,"duration_ms":1})"),
      "field \"exit_code\" is not an integer");
  ExpectError(
      DecodeEventPayload(
          R"({"event":"exit","exit_code":0,"signal":0,"timed_out":1,"output_truncated":false,"duration_ms":1})"),
      "field \"timed_out\" is not a boolean");
  ExpectError(DecodeEventPayload(R"({"event":"file","size":1.5,"mode":420})"), "field \"size\"");
  ExpectError(DecodeEventPayload(R"({"event":"file","size":1})"), "missing field \"mode\"");
  ExpectError(DecodeEventPayload(R"({"event":"entries","entries":{}})"), "field \"entries\"");
  ExpectError(
      DecodeEventPayload(
          R"({"event":"entries","entries":[{"name":"a","type":"socket","size":0,"mode":0}]})"),
      "field \"type\"");
  ExpectError(DecodeEventPayload(R"({"event":"error","code":7})"), "field \"code\"");
  ExpectError(DecodeEventPayload(R"({"event":"teleport"})"), "unknown event");
  ExpectError(DecodeEventPayload("[1]"), "not a JSON object");
}

TEST(MessagesTest, OutOfRangeValuesAreErrors) {
  auto exit = [](const std::string& fields) {
    return DecodeEventPayload(R"({"event":"exit","timed_out":false,"output_truncated":false,)" +
                              fields + "}");
  };
  ExpectError(exit(R"("exit_code":256,"signal":0,"duration_ms":0)"), "outside -1..255");
  ExpectError(exit(R"("exit_code":-2,"signal":0,"duration_ms":0)"), "outside -1..255");
  ExpectError(exit(R"("exit_code":-1,"signal":65,"duration_ms":0)"), "outside 0..64");
  ExpectError(exit(R"("exit_code":0,"signal":0,"duration_ms":-1)"), "field \"duration_ms\"");
  ExpectError(exit(R"("exit_code":0,"signal":0,"duration_ms":18446744073709551615)"),
              "field \"duration_ms\"");
  ExpectError(exit(R"("exit_code":0,"signal":9,"duration_ms":0)"), "-1 goes with a signal");
  ExpectError(DecodeEventPayload(R"({"event":"file","size":-1,"mode":420})"), "field \"size\"");
  ExpectError(DecodeEventPayload(R"({"event":"file","size":1,"mode":65536})"), "field \"mode\"");
}

TEST(MessagesTest, UnknownFieldsAreErrors) {
  ExpectError(DecodeEventPayload(R"({"event":"done","extra":1})"), "unknown field \"extra\"");
  auto r = DecodeRequestPayload(R"({"op":"read_file","path":"/x","offset":5})");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unknown field \"offset\""), std::string::npos);
}

TEST(MessagesTest, RequestDefaultsAndErrors) {
  auto e = DecodeRequestPayload(R"({"op":"exec","argv":["true"]})");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(std::get<Exec>(*e).cwd, "/");
  EXPECT_FALSE(std::get<Exec>(*e).stdin_stream);
  EXPECT_FALSE(DecodeRequestPayload(R"({"op":"exec","argv":[]})").ok());
  EXPECT_FALSE(DecodeRequestPayload(R"({"op":"exec","argv":[1]})").ok());
  EXPECT_FALSE(DecodeRequestPayload(R"({"op":"exec","argv":["a"],"env":{"A":1}})").ok());
  EXPECT_FALSE(DecodeRequestPayload(R"({"op":"exec","argv":["a"],"stdin":"file"})").ok());
  EXPECT_FALSE(DecodeRequestPayload(R"({"op":"kill","target":0})").ok());
  EXPECT_FALSE(DecodeRequestPayload(R"({"op":"kill","target":1,"signal":99})").ok());
  EXPECT_FALSE(DecodeRequestPayload(R"({"op":"frobnicate"})").ok());
  EXPECT_FALSE(DecodeRequestPayload(R"({"op":"remove"})").ok()) << "a path is required";
  EXPECT_FALSE(DecodeRequestPayload(R"({"op":"remove","path":7})").ok());
  EXPECT_FALSE(DecodeRequestPayload(R"({"op":"remove","path":"/x","recursive":true})").ok());
}

TEST(MessagesTest, ExecUserAndMkdirOwnerRoundTripAndAreOptional) {
  Exec e;
  e.argv = {"id"};
  e.user = User{1000, 100};
  EXPECT_EQ(RoundTripRequest(e).user, (User{1000, 100}));
  e.user = User{0, static_cast<uint32_t>(kMaxId)};
  EXPECT_EQ(RoundTripRequest(e).user, (User{0, 0xfffffffeu}));
  e.user.reset();
  EXPECT_EQ(RoundTripRequest(e).user, std::nullopt);
  // Absent is not sent at all: what an agent of before these fields reads, unchanged.
  EXPECT_EQ(EncodeRequest(e).find("user"), std::string::npos);
  EXPECT_EQ(RoundTripRequest(MakeDir{"/w", 0755, true, User{7, 8}}).owner, (User{7, 8}));
  EXPECT_EQ(RoundTripRequest(MakeDir{"/w", 0755, true}).owner, std::nullopt);
  EXPECT_EQ(EncodeRequest(MakeDir{"/w", 0755, true}).find("owner"), std::string::npos);
  EXPECT_EQ(RoundTripRequest(WriteFile{"/w/f", 0644, true, User{7, 8}}).owner, (User{7, 8}));
  EXPECT_EQ(EncodeRequest(WriteFile{"/w/f", 0644, true}).find("owner"), std::string::npos);
  auto bad_owner = DecodeRequestPayload(R"({"op":"write_file","path":"/f","owner":{"uid":-1}})");
  EXPECT_FALSE(bad_owner.ok());
  // JSON null is absent, as for every field.
  auto null_user = DecodeRequestPayload(R"({"op":"exec","argv":["id"],"user":null})");
  ASSERT_TRUE(null_user.ok()) << null_user.status().ToString();
  EXPECT_EQ(std::get<Exec>(*null_user).user, std::nullopt);
}

TEST(MessagesTest, HostileUsersAreCleanDecodeErrors) {
  auto exec = [](const std::string& user) {
    return DecodeRequestPayload(R"({"op":"exec","argv":["id"],"user":)" + user + "}");
  };
  auto mkdir = [](const std::string& owner) {
    return DecodeRequestPayload(R"({"op":"mkdir","path":"/w","owner":)" + owner + "}");
  };
  auto expect = [](const StatusOr<Request>& r, const std::string& text) {
    ASSERT_FALSE(r.ok()) << "decoded";
    EXPECT_EQ(r.status().code(), StatusCode::kProtocolError);
    EXPECT_NE(r.status().message().find(text), std::string::npos) << r.status().ToString();
  };
  expect(exec(R"({"uid":-1,"gid":0})"), "exec request: user: field \"uid\" is -1, outside");
  expect(exec(R"({"uid":0,"gid":-5})"), "field \"gid\" is -5");
  // 2^32 - 1 is the kernel's "unchanged": asking for it would leave the process root.
  expect(exec(R"({"uid":4294967295,"gid":0})"), "outside 0..4294967294");
  expect(exec(R"({"uid":4294967296,"gid":0})"), "field \"uid\"");
  expect(exec(R"({"uid":18446744073709551615,"gid":0})"), "field \"uid\"");
  expect(exec(R"({"uid":1e3,"gid":0})"), "field \"uid\" is not an integer");
  expect(exec(R"({"uid":"1000","gid":0})"), "field \"uid\" is not an integer");
  expect(exec(R"({"uid":true,"gid":0})"), "field \"uid\" is not an integer");
  expect(exec(R"({"uid":1000})"), "missing field \"gid\"");
  expect(exec(R"({"gid":1000})"), "missing field \"uid\"");
  expect(exec(R"({"uid":1,"gid":1,"groups":[0]})"), "unknown field \"groups\"");
  expect(exec(R"({"uid":1,"gid":1,"op":"exec"})"), "unknown field \"op\"");
  expect(exec("1000"), "field \"user\" is not an object");
  expect(exec(R"("1000:1000")"), "field \"user\" is not an object");
  expect(exec("[1000,1000]"), "field \"user\" is not an object");
  expect(mkdir(R"({"uid":1,"gid":4294967296})"), "mkdir request: owner: field \"gid\"");
  expect(mkdir("7"), "field \"owner\" is not an object");
  // write_file's owner is checked alike; other requests have none.
  expect(DecodeRequestPayload(R"({"op":"write_file","path":"/w","owner":{"uid":1,"gid":-1}})"),
         "write_file request: owner: field \"gid\"");
  expect(DecodeRequestPayload(R"({"op":"read_file","path":"/w","owner":{"uid":1,"gid":1}})"),
         "unknown field \"owner\"");
}

TEST(MessagesTest, ExecTtyAndResizeRoundTripAndTtyIsOptional) {
  Exec e;
  e.argv = {"bash"};
  EXPECT_EQ(EncodeRequest(e).find("tty"), std::string::npos) << "absent unless asked for";
  EXPECT_EQ(RoundTripRequest(e).tty, std::nullopt);
  e.tty = TerminalSize{50, 132};
  EXPECT_EQ(RoundTripRequest(e).tty, (TerminalSize{50, 132}));
  e.tty = TerminalSize{10000, 1};
  EXPECT_EQ(RoundTripRequest(e).tty, (TerminalSize{10000, 1}));
  Resize z = RoundTripRequest(Resize{7, {33, 101}});
  EXPECT_EQ(z.target, 7u);
  EXPECT_EQ(z.size, (TerminalSize{33, 101}));
  EXPECT_EQ(RequestName(Request(Resize{})), "resize");
  auto null_tty = DecodeRequestPayload(R"({"op":"exec","argv":["sh"],"tty":null})");
  ASSERT_TRUE(null_tty.ok()) << null_tty.status().ToString();
  EXPECT_EQ(std::get<Exec>(*null_tty).tty, std::nullopt);
}

TEST(MessagesTest, HostileTerminalSizesAreCleanDecodeErrors) {
  auto exec = [](const std::string& tty) {
    return DecodeRequestPayload(R"({"op":"exec","argv":["sh"],"tty":)" + tty + "}");
  };
  auto resize = [](const std::string& fields) {
    return DecodeRequestPayload(R"({"op":"resize",)" + fields + "}");
  };
  auto expect = [](const StatusOr<Request>& r, const std::string& text) {
    ASSERT_FALSE(r.ok()) << "decoded";
    EXPECT_EQ(r.status().code(), StatusCode::kProtocolError);
    EXPECT_NE(r.status().message().find(text), std::string::npos) << r.status().ToString();
  };
  expect(exec(R"({"rows":0,"cols":80})"),
         "exec request: tty: field \"rows\" is 0, outside 1..10000");
  expect(exec(R"({"rows":24,"cols":10001})"), "field \"cols\" is 10001, outside 1..10000");
  // 65536 would wrap to 0 in TIOCSWINSZ's 16 bits if it were not refused.
  expect(exec(R"({"rows":65536,"cols":80})"), "field \"rows\" is 65536");
  expect(exec(R"({"rows":-24,"cols":80})"), "field \"rows\" is -24");
  expect(exec(R"({"rows":24.5,"cols":80})"), "field \"rows\" is not an integer");
  expect(exec(R"({"rows":24})"), "missing field \"cols\"");
  expect(exec(R"({"rows":24,"cols":80,"xpixel":9})"), "unknown field \"xpixel\"");
  expect(exec("true"), "field \"tty\" is not an object");
  expect(exec("[24,80]"), "field \"tty\" is not an object");
  expect(resize(R"("target":0,"rows":1,"cols":1)"), "resize request: field \"target\" is 0");
  expect(resize(R"("target":4294967296,"rows":1,"cols":1)"), "field \"target\"");
  expect(resize(R"("target":3,"rows":1)"), "missing field \"cols\"");
  expect(resize(R"("target":3,"rows":1,"cols":0)"), "field \"cols\" is 0");
  expect(resize(R"("target":3,"rows":1,"cols":1,"tty":{})"), "unknown field \"tty\"");
  // The size belongs to exec's tty and resize only.
  expect(DecodeRequestPayload(R"({"op":"kill","target":3,"rows":1})"), "unknown field \"rows\"");
}

TEST(MessagesTest, ProcessTableMessagesRoundTrip) {
  Exec e;
  e.argv = {"sleep", "9"};
  e.background = true;
  e.ring_bytes = 4096;
  Exec back = RoundTripRequest(e);
  EXPECT_TRUE(back.background);
  EXPECT_EQ(back.ring_bytes, 4096u);
  Exec plain;
  plain.argv = {"true"};
  EXPECT_EQ(RoundTripRequest(plain).ring_bytes, kDefaultRingBytes);
  Attach a = RoundTripRequest(Attach{42, false});
  EXPECT_EQ(a.pid, 42);
  EXPECT_FALSE(a.output);
  RoundTripRequest(ListProcesses{});
  SignalProcess k = RoundTripRequest(SignalProcess{42, 15, true});
  EXPECT_EQ(k.pid, 42);
  EXPECT_EQ(k.signal, 15);
  EXPECT_TRUE(k.tree);
  EXPECT_EQ(RoundTripEvent(Started{77}).pid, 77);
  ProcessEntry running;
  running.pid = 5;
  running.argv = {"sh"};
  running.background = true;
  running.started_unix_ms = 9;
  ProcessEntry ended = running;
  ended.pid = 6;
  ended.running = false;
  ended.exit = Exit();
  ended.exit->exit_code = -1;
  ended.exit->signal = 9;
  ended.exit->duration_ms = 3;
  ended.dropped_stdout = 10;
  Processes p = RoundTripEvent(Processes{{running, ended}});
  ASSERT_EQ(p.processes.size(), 2u);
  EXPECT_EQ(p.processes[0], running);
  EXPECT_EQ(p.processes[1], ended);
  Exit dropped;
  dropped.dropped_stdout = 5;
  dropped.dropped_stderr = 6;
  Exit x = RoundTripEvent(dropped);
  EXPECT_EQ(x.dropped_stdout, 5u);
  EXPECT_EQ(x.dropped_stderr, 6u);
}

TEST(MessagesTest, HostileProcessTableValuesAreErrors) {
  ExpectError(DecodeRequestPayload(R"({"op":"exec","argv":["x"],"ring_bytes":67108865})"),
              "ring_bytes");
  ExpectError(DecodeRequestPayload(R"({"op":"attach","pid":0})"), "pid");
  ExpectError(DecodeRequestPayload(R"({"op":"attach","pid":4194305})"), "pid");
  ExpectError(DecodeRequestPayload(R"({"op":"signal_process","pid":3,"signal":65})"), "signal");
  ExpectError(DecodeRequestPayload(R"({"op":"list_processes","all":true})"), "all");
  ExpectError(DecodeEventPayload(R"({"event":"started","pid":-3})"), "pid");
  ExpectError(DecodeEventPayload(R"({"event":"processes","processes":{}})"), "processes");
  ExpectError(
      DecodeEventPayload(R"({"event":"exit","exit_code":0,"signal":0,"timed_out":false,)"
                         R"("output_truncated":false,"duration_ms":0,"dropped_stdout":-1})"),
      "dropped_stdout");
}

TEST(MessagesTest, DeepNestingIsAnErrorNotACrash) {
  std::string deep(kMaxPayload / 2, '[');
  EXPECT_FALSE(DecodeEventPayload(deep).ok());
  std::string deep_ok =
      R"({"event":"done","x":)" + std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_FALSE(DecodeEventPayload(deep_ok).ok());
}

TEST(MessagesTest, EntriesPagesStayUnderTheirSizeAndKeepEveryEntry) {
  std::vector<DirEntry> entries;
  for (int i = 0; i < 20000; ++i) {
    entries.push_back({std::to_string(i) + std::string(200, 'n'), "file", 1, 0644});
  }
  auto pages = EncodeEntriesPages(entries, kDataChunk);
  EXPECT_GT(pages.size(), 10u);
  size_t total = 0;
  for (size_t i = 0; i < pages.size(); ++i) {
    EXPECT_LE(pages[i].size(), kDataChunk);
    auto ev = DecodeEventPayload(pages[i]);
    ASSERT_TRUE(ev.ok()) << ev.status().ToString();
    const Entries& page = std::get<Entries>(*ev);
    EXPECT_EQ(page.more, i + 1 < pages.size());
    total += page.entries.size();
  }
  EXPECT_EQ(total, entries.size());
  auto empty = EncodeEntriesPages({}, kDataChunk);
  ASSERT_EQ(empty.size(), 1u);
  EXPECT_FALSE(std::get<Entries>(*DecodeEventPayload(empty[0])).more);
}

}  // namespace
}  // namespace codebox::protocol::msg
