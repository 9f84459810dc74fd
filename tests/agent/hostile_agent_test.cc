// AgentClient against a hostile agent: a scripted fake agent on a socketpair sends what box
// code that took over the in-box agent could send. The host must not crash, flood, hang or
// believe it: every case ends in a clear Status, with memory O(cap).
#include "tests/agent/hostile_agent.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <thread>

#include "base/io.h"
#include "agent_client/agent_client.h"
#include "protocol/frame.h"
#include "protocol/message.h"
#include "tests/common/rss.h"

namespace codebox::testing {
namespace {

TEST(HostileAgentTest, MistypedEventNameIsAProtocolErrorNotACrash) {
  HostileAgent agent([](HostileAgent& a) {
    auto [stream, req] = a.NextRequest();
    a.Event(stream, Json{{"event", 5}});
  });
  auto client = agent.Connect();
  ASSERT_TRUE(client);
  auto r = client->Exec(True());
  ASSERT_FALSE(r.ok());
  ExpectViolation(r.status(), "field \"event\"");
  ExpectViolation(client->connection_status(), "agent protocol violation");
}

TEST(HostileAgentTest, MistypedExitCodeIsAProtocolErrorNamingTheField) {
  HostileAgent agent([](HostileAgent& a) {
    auto [stream, req] = a.NextRequest();
    Json exit = ExitEvent();
    exit["exit_code"] = "zero";
    a.Event(stream, exit);
  });
  auto client = agent.Connect();
  ASSERT_TRUE(client);
  auto r = client->Exec(True());
  ASSERT_FALSE(r.ok());
  ExpectViolation(r.status(), "field \"exit_code\" is not an integer");
}

TEST(HostileAgentTest, ExitValuesOutOfRangeAreViolations) {
  const std::pair<const char*, Json> cases[] = {
      {"exit_code", 300}, {"exit_code", -7}, {"signal", 99}, {"duration_ms", -5}};
  for (const auto& one_case : cases) {
    // Named copies: clang 14 cannot capture structured bindings in a lambda.
    const char* field = one_case.first;
    const Json& value = one_case.second;
    HostileAgent agent([&](HostileAgent& a) {
      auto [stream, req] = a.NextRequest();
      Json exit = ExitEvent();
      exit[field] = value;
      a.Event(stream, exit);
    });
    auto client = agent.Connect();
    ASSERT_TRUE(client);
    auto r = client->Exec(True());
    ASSERT_FALSE(r.ok()) << field;
    ExpectViolation(r.status(), std::string("field \"") + field + "\"");
    EXPECT_NE(r.status().message().find("outside"), std::string::npos) << r.status().ToString();
  }
}

TEST(HostileAgentTest, SecondExitEndsTheConnection) {
  HostileAgent agent([](HostileAgent& a) {
    auto [stream, req] = a.NextRequest();
    a.Event(stream, ExitEvent(0));
    a.Event(stream, ExitEvent(1));
  });
  auto client = agent.Connect();
  ASSERT_TRUE(client);
  auto r = client->Exec(True());
  ASSERT_TRUE(r.ok()) << r.status().ToString();  // the first exit ended the call
  EXPECT_EQ(r->exit_code, 0);
  ExpectViolation(WaitDead(*client), "second exit on stream 1");
  auto again = client->Exec(True());
  EXPECT_EQ(again.status().code(), StatusCode::kProtocolError);
}

TEST(HostileAgentTest, OutputAfterExitEndsTheConnection) {
  HostileAgent agent([](HostileAgent& a) {
    auto [stream, req] = a.NextRequest();
    a.Event(stream, ExitEvent(0));
    a.Send(FrameType::kStdout, stream, "late");
  });
  auto client = agent.Connect();
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->Exec(True()).ok());
  ExpectViolation(WaitDead(*client), "stdout on stream 1 after its terminal exit");
}

TEST(HostileAgentTest, ExitForAStreamTheHostNeverOpened) {
  HostileAgent agent([](HostileAgent& a) {
    a.NextRequest();
    a.Event(5, ExitEvent(0));
  });
  auto client = agent.Connect();
  ASSERT_TRUE(client);
  auto r = client->Exec(True());
  ASSERT_FALSE(r.ok());
  ExpectViolation(r.status(), "exit on stream 5, which the host never opened");
}

TEST(HostileAgentTest, FramesThatDoNotBelongToTheRequest) {
  {
    HostileAgent agent([](HostileAgent& a) {
      auto [stream, req] = a.NextRequest();
      a.Send(FrameType::kData, stream, "file bytes on an exec");
    });
    auto client = agent.Connect();
    ASSERT_TRUE(client);
    ExpectViolation(client->Exec(True()).status(), "data on exec stream 1");
  }
  {
    HostileAgent agent([](HostileAgent& a) {
      auto [stream, req] = a.NextRequest();
      a.Event(stream, Json{{"event", "file"}, {"size", 3}, {"mode", 420}});
      a.Send(FrameType::kStdout, stream, "out");
    });
    auto client = agent.Connect();
    ASSERT_TRUE(client);
    ExpectViolation(client->ReadFile("/x").status(), "stdout on read_file stream 1");
  }
  {
    HostileAgent agent([](HostileAgent& a) {
      auto [stream, req] = a.NextRequest();
      a.Event(stream, ExitEvent(0));
    });
    auto client = agent.Connect();
    ASSERT_TRUE(client);
    ExpectViolation(client->ListDir("/x").status(), "exit on list_dir stream 1");
  }
}

TEST(HostileAgentTest, OutOfPlaceFramesAreViolations) {
  struct Case {
    std::function<void(HostileAgent&, uint32_t)> send;
    bool read;  // read_file, else exec
    const char* expect;
  };
  const Case cases[] = {
      {[](HostileAgent& a, uint32_t s) { a.Send(FrameType::kStdin, s, "x"); }, false,
       "stdin on exec stream 1"},
      {[](HostileAgent& a, uint32_t) {
         a.Event(0, Json{{"event", "done"}});
       },
       false, "done frame on stream 0"},
      {[](HostileAgent& a, uint32_t s) { a.Send(FrameType::kHello, s, "{}"); }, false,
       "hello on exec stream 1"},
      {[](HostileAgent& a, uint32_t s) { a.Send(FrameType::kData, s, "early"); }, true,
       "data before the file event"},
      {[](HostileAgent& a, uint32_t s) {
         a.Event(s, Json{{"event", "file"}, {"size", 1}, {"mode", 420}});
         a.Event(s, Json{{"event", "file"}, {"size", 1}, {"mode", 420}});
       },
       true, "second file event on read_file stream 1"},
  };
  for (const Case& c : cases) {
    HostileAgent agent([&](HostileAgent& a) {
      auto [stream, req] = a.NextRequest();
      c.send(a, stream);
    });
    auto client = agent.Connect();
    ASSERT_TRUE(client);
    Status st = c.read ? client->ReadFile("/f").status() : client->Exec(True()).status();
    ExpectViolation(st, c.expect);
  }
}

TEST(HostileAgentTest, StdoutFloodKeepsOnlyTheCap) {
  constexpr size_t kCap = 1u << 20;
  constexpr size_t kChunk = 256u << 10;
  constexpr int kChunks = 400;  // 100 MiB
  HostileAgent agent([&](HostileAgent& a) {
    auto [stream, req] = a.NextRequest();
    std::string chunk(kChunk, 'x');
    for (int i = 0; i < kChunks; ++i) {
      if (!a.Send(i % 2 ? FrameType::kStdout : FrameType::kStderr, stream, chunk)) return;
    }
    a.Event(stream, ExitEvent(0));  // and claims nothing was truncated
  });
  auto client = agent.Connect();
  ASSERT_TRUE(client);
  ResetPeakRss();
  uint64_t before = PeakRss();
  protocol::ExecRequest req = True();
  req.exec.output_limit = kCap;
  std::atomic<size_t> seen{0};
  req.on_stdout = [&seen](std::string_view piece) { seen += piece.size(); };
  auto r = client->Exec(req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data.size(), kCap);
  EXPECT_EQ(r->stderr_data.size(), kCap);
  EXPECT_EQ(seen.load(), kCap);
  EXPECT_TRUE(r->output_truncated);
  uint64_t growth = PeakRss() - before;
  if (kRssIsMeaningful) {
    EXPECT_LT(growth, 24u << 20) << "host kept " << growth << " bytes for 100 MiB";
  }
}

TEST(HostileAgentTest, ReadFileNeverTrustsTheClaimedSize) {
  {
    // The reserve attack: a claimed size of 4 EiB, refused before any data.
    HostileAgent agent([](HostileAgent& a) {
      auto [stream, req] = a.NextRequest();
      a.Event(stream, Json{{"event", "file"}, {"size", int64_t{1} << 62}, {"mode", 420}});
      a.Send(FrameType::kData, stream, "x");
      a.Send(FrameType::kData, stream, "");
    });
    auto client = agent.Connect();
    ASSERT_TRUE(client);
    ResetPeakRss();
    uint64_t before = PeakRss();
    auto r = client->ReadFile("/big");
    EXPECT_EQ(r.status().code(), StatusCode::kLimitExceeded) << r.status().ToString();
    if (kRssIsMeaningful) {
      EXPECT_LT(PeakRss() - before, 8u << 20);
    }
    // Late data of the refused file is dropped, not a violation.
    std::this_thread::sleep_for(50ms);
    EXPECT_TRUE(client->connection_status().ok()) << client->connection_status().ToString();
  }
  {
    // A small claim, then more bytes than the cap.
    HostileAgent agent([](HostileAgent& a) {
      auto [stream, req] = a.NextRequest();
      a.Event(stream, Json{{"event", "file"}, {"size", 10}, {"mode", 420}});
      std::string chunk(256u << 10, 'y');
      for (int i = 0; i < 40; ++i) a.Send(FrameType::kData, stream, chunk);
      a.Send(FrameType::kData, stream, "");
    });
    auto client = agent.Connect();
    ASSERT_TRUE(client);
    auto r = client->ReadFile("/grows", 1u << 20);
    EXPECT_EQ(r.status().code(), StatusCode::kLimitExceeded) << r.status().ToString();
  }
}

TEST(HostileAgentTest, ReadFileStreamCallbackErrorEndsTheCallOnly) {
  HostileAgent agent([](HostileAgent& a) {
    auto [stream, req] = a.NextRequest();
    a.Event(stream, Json{{"event", "file"}, {"size", 6}, {"mode", 384}});
    a.Send(FrameType::kData, stream, "abc");
    a.Send(FrameType::kData, stream, "def");
    a.Send(FrameType::kData, stream, "");
    // The host gave up after "abc" and cancels the read; the agent had already finished it.
    auto [cs, cancel] = a.NextRequest();
    if (cancel.value("op", "") != "cancel" || cancel.value("target", 0u) != stream) return;
    a.Event(cs, Json{{"event", "error"}, {"code", "not_found"}, {"message", "nothing to cancel"}});
    auto [stream2, req2] = a.NextRequest();
    a.Event(stream2, Json{{"event", "done"}});
  });
  auto client = agent.Connect();
  ASSERT_TRUE(client);
  uint64_t size = 0;
  uint32_t mode = 0;
  std::string got;
  Status st = client->ReadFileStream(
      "/f", 100,
      [&](uint64_t s, uint32_t m) {
        size = s;
        mode = m;
        return Status::Ok();
      },
      [&](std::string_view chunk) {
        got.append(chunk);
        return IoError("disk full");
      });
  EXPECT_EQ(st.code(), StatusCode::kIoError) << st.ToString();
  EXPECT_EQ(size, 6u);
  EXPECT_EQ(mode, 0600u);
  EXPECT_EQ(got, "abc");
  EXPECT_TRUE(client->MakeDir("/d").ok());  // the connection lives on
}

TEST(HostileAgentTest, ListingIsAssembledFromPagesWithinTheCap) {
  auto page = [](int first, int count, bool more) {
    Json list = Json::array();
    for (int i = first; i < first + count; ++i) {
      list.push_back(
          {{"name", "f" + std::to_string(i)}, {"type", "file"}, {"size", 1}, {"mode", 420}});
    }
    Json j{{"event", "entries"}, {"entries", list}};
    if (more) j["more"] = true;
    return j;
  };
  HostileAgent agent([&](HostileAgent& a) {
    auto [s1, r1] = a.NextRequest();
    a.Event(s1, page(0, 100, true));
    a.Event(s1, page(100, 100, true));
    a.Event(s1, page(200, 50, false));
    auto [s2, r2] = a.NextRequest();
    for (int i = 0; i < 1000; ++i) {  // endless pages
      if (!a.Event(s2, page(i * 100, 100, true))) return;
    }
  });
  auto client = agent.Connect();
  ASSERT_TRUE(client);
  auto all = client->ListDir("/d");
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 250u);
  EXPECT_EQ((*all)[249].name, "f249");
  auto flood = client->ListDir("/d", 1000);
  EXPECT_EQ(flood.status().code(), StatusCode::kLimitExceeded) << flood.status().ToString();
}

TEST(HostileAgentTest, BadListingEntriesAreViolations) {
  HostileAgent agent([](HostileAgent& a) {
    auto [stream, req] = a.NextRequest();
    a.Event(stream,
            Json{{"event", "entries"},
                 {"entries", {{{"name", "a"}, {"type", "file"}, {"size", "big"}, {"mode", 1}}}}});
  });
  auto client = agent.Connect();
  ASSERT_TRUE(client);
  ExpectViolation(client->ListDir("/d").status(), "field \"size\"");
}

TEST(HostileAgentTest, SilentAgentHitsTheIdleDeadline) {
  HostileAgent agent([](HostileAgent& a) {
    a.NextRequest();  // read_file: never answered
    // The host gives up at its deadline and cancels the read in the agent.
    auto [cancel_stream, cancel] = a.NextRequest();
    if (cancel.value("op", "") != "cancel" || cancel.value("target", 0) != 1) return;
    a.Event(cancel_stream, Json{{"event", "done"}});
    auto [stream, req] = a.NextRequest();
    // The late answer to the abandoned read is dropped; this request is answered.
    a.Event(1, Json{{"event", "file"}, {"size", 1}, {"mode", 420}});
    a.Event(stream, Json{{"event", "done"}});
  });
  auto client = agent.Connect(200ms);
  ASSERT_TRUE(client);
  auto start = std::chrono::steady_clock::now();
  auto r = client->ReadFile("/never");
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status().ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_TRUE(client->MakeDir("/d").ok());
  std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(client->connection_status().ok()) << client->connection_status().ToString();
}

TEST(HostileAgentTest, ExecWithoutTimeoutProbesAndGivesUpOnASilentAgent) {
  HostileAgent agent([](HostileAgent& a) {
    a.NextRequest();  // the exec
    a.NextRequest();  // the probe: never answered
  });
  auto client = agent.Connect(200ms);
  ASSERT_TRUE(client);
  protocol::ExecRequest req = True();
  req.exec.timeout = kNoTimeout;
  auto start = std::chrono::steady_clock::now();
  auto r = client->Exec(req);
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status().ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
}

TEST(HostileAgentTest, ExecWithoutTimeoutWaitsWhileTheAgentSaysItRuns) {
  std::atomic<int> probes{0};
  HostileAgent agent([&](HostileAgent& a) {
    auto [exec_stream, exec] = a.NextRequest();
    for (int i = 0; i < 3; ++i) {
      auto [stream, probe] = a.NextRequest();
      if (!probe.is_object() || probe.value("op", "") != "kill" || probe.value("signal", -1) != 0) {
        return;
      }
      ++probes;
      a.Event(stream, Json{{"event", "done"}});
    }
    a.Event(exec_stream, ExitEvent(7));
  });
  auto client = agent.Connect(100ms);
  ASSERT_TRUE(client);
  protocol::ExecRequest req = True();
  req.exec.timeout = kNoTimeout;
  auto r = client->Exec(req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 7);
  EXPECT_EQ(probes.load(), 3);
}

TEST(HostileAgentTest, ThrowingCallbackFailsItsCallOnly) {
  HostileAgent agent([](HostileAgent& a) {
    auto [s1, r1] = a.NextRequest();
    a.Send(FrameType::kStdout, s1, "boom");
    a.Send(FrameType::kStdout, s1, "more");
    a.Event(s1, ExitEvent(0));
    // The host gave up on s1 (its callback threw) and cancels it in the agent.
    auto [cs, cancel] = a.NextRequest();
    if (cancel.value("op", "") != "cancel" || cancel.value("target", 0u) != s1) return;
    a.Event(cs, Json{{"event", "done"}});
    auto [s2, r2] = a.NextRequest();
    a.Send(FrameType::kStdout, s2, "fine");
    a.Event(s2, ExitEvent(0));
  });
  auto client = agent.Connect();
  ASSERT_TRUE(client);
  protocol::ExecRequest req = True();
  req.on_stdout = [](std::string_view) { throw std::runtime_error("user bug"); };
  auto r = client->Exec(req);
  EXPECT_EQ(r.status().code(), StatusCode::kInternal) << r.status().ToString();
  EXPECT_NE(r.status().message().find("user bug"), std::string::npos);
  auto ok = client->Exec(True());
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->stdout_data, "fine");
}

TEST(HostileAgentTest, ErrorTextFromTheAgentIsMadeTerminalSafe) {
  HostileAgent agent([](HostileAgent& a) {
    auto [stream, req] = a.NextRequest();
    a.Event(stream, Json{{"event", "error"},
                         {"code", "not_found"},
                         {"message", "gone\x1b]0;pwned\x07" + std::string(100000, 'z')}});
  });
  auto client = agent.Connect();
  ASSERT_TRUE(client);
  auto r = client->ReadFile("/x");
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(r.status().message().find('\x1b'), std::string::npos);
  EXPECT_LT(r.status().message().size(), 8192u);
}

TEST(HostileAgentTest, RequestsThatCannotBeSentAreRefusedOnTheHost) {
  HostileAgent agent([](HostileAgent&) {});
  auto client = agent.Connect();
  ASSERT_TRUE(client);
  protocol::ExecRequest big = True();
  big.exec.argv = {"echo", std::string(2u << 20, 'a')};
  auto r = client->Exec(big);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("argv and environment may take at most"), std::string::npos)
      << r.status().ToString();
  protocol::ExecRequest nul = True();
  nul.exec.argv = {"echo", std::string("a\0b", 3)};
  auto n = client->Exec(nul);
  EXPECT_EQ(n.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(n.status().message().find("argv[1] contains a NUL byte"), std::string::npos);
  EXPECT_TRUE(client->connection_status().ok());
}

TEST(HostileAgentTest, AgentThatStopsReadingCannotBlockAWriteForever) {
  HostileAgent agent([](HostileAgent& a) {
    a.NextRequest();
    std::this_thread::sleep_for(1500ms);  // reads nothing while the host sends 64 MiB
  });
  auto client = agent.Connect(300ms);
  ASSERT_TRUE(client);
  std::string data(64u << 20, 'd');
  auto start = std::chrono::steady_clock::now();
  Status st = client->WriteFile("/big", data);
  EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded) << st.ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1400ms);
}

}  // namespace
}  // namespace codebox::testing
