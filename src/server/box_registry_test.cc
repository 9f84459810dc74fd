// BoxRegistry with real jail boxes: create, lease, destroy, limits, reaping and shutdown.
#include "server/box_registry.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "base/fs.h"
#include "base/owner.h"
#include "jail/jail.h"
#include "server/json_log.h"
#include "server/registry_test_util.h"

namespace codebox::server {
namespace {

using std::chrono::milliseconds;

TEST(BoxRegistryTest, CreateAcquireGetListDestroy) {
  CODEBOX_SKIP_WITHOUT_BOXES();
  BoxRegistry registry(TestRegistryOptions());
  auto record = registry.Create(testing::TestBoxOptions());
  ASSERT_TRUE(record.ok()) << record.status().ToString();
  EXPECT_TRUE(record->id.starts_with("b-"));
  EXPECT_EQ(record->id.size(), 18u);
  EXPECT_EQ(record->id.find_first_not_of("0123456789abcdef", 2), std::string::npos);
  EXPECT_FALSE(record->from_pool);
  EXPECT_EQ(record->info.driver, "jail");
  EXPECT_EQ(record->state, "idle");
  EXPECT_EQ(registry.box_count(), 1u);
  {
    auto lease = registry.Acquire(record->id);
    ASSERT_TRUE(lease.ok()) << lease.status().ToString();
    EXPECT_EQ(lease->id(), record->id);
    auto out = lease->box().Run("print(6 * 7)");
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(*out, "42\n");
    auto busy = registry.Get(record->id);
    ASSERT_TRUE(busy.ok());
    EXPECT_EQ(busy->state, "busy");
    EXPECT_EQ(busy->requests, 1u);
  }
  auto idle = registry.Get(record->id);
  ASSERT_TRUE(idle.ok());
  EXPECT_EQ(idle->state, "idle");
  auto second = registry.Create(testing::TestBoxOptions());
  ASSERT_TRUE(second.ok());
  EXPECT_NE(second->id, record->id);
  auto list = registry.List();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].id, record->id);  // oldest first
  EXPECT_EQ(list[1].id, second->id);

  ASSERT_TRUE(registry.Destroy(record->id).ok());
  EXPECT_EQ(registry.Get(record->id).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(registry.Acquire(record->id).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(registry.Destroy(record->id).code(), StatusCode::kNotFound);
  EXPECT_EQ(registry.box_count(), 1u);
  EXPECT_EQ(registry.Get("b-0000000000000000").status().code(), StatusCode::kNotFound);
}

TEST(BoxRegistryTest, MaxBoxesCountsPoolBoxes) {
  CODEBOX_SKIP_WITHOUT_BOXES();
  RegistryOptions options = TestRegistryOptions();
  options.max_boxes = 2;
  auto spec = ParsePoolSpec("python=1,memory=256", options.defaults);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  options.pools.push_back(*spec);
  BoxRegistry registry(options);
  registry.Start();
  ASSERT_TRUE(WaitFor([&] { return ReadyIn(registry) == 1; })) << registry.Pools()[0].last_error;
  auto first = registry.Create(testing::TestBoxOptions());  // memory 512: not the pool's
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_FALSE(first->from_pool);
  auto over = registry.Create(testing::TestBoxOptions());
  EXPECT_EQ(over.status().code(), StatusCode::kResourceExhausted) << over.status().ToString();
  EXPECT_NE(over.status().message().find("max-boxes"), std::string::npos);
  bool from_pool = true;
  EXPECT_EQ(registry.TakeOneShot(testing::TestBoxOptions(), &from_pool).status().code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(registry.box_count(), 2u);
  // Freeing a slot lets a request in again.
  ASSERT_TRUE(registry.Destroy(first->id).ok());
  EXPECT_TRUE(registry.Create(testing::TestBoxOptions()).ok());
}

TEST(BoxRegistryTest, FiftyConcurrentCreatesNeverExceedTwenty) {
  CODEBOX_SKIP_WITHOUT_BOXES();
  RegistryOptions options = TestRegistryOptions();
  options.max_boxes = 20;
  BoxRegistry registry(options);
  const std::string jails = "/run/codebox-jail";
  const int jails_before = testing::CountDirEntries(jails, testing::OurJailIdPrefix());
  std::atomic<bool> done{false};
  std::atomic<int> most_jails{0}, most_counted{0};
  std::thread monitor([&] {  // the boxes that exist, seen from outside the registry too
    while (!done) {
      int n = testing::CountDirEntries(jails, testing::OurJailIdPrefix()) - jails_before;
      most_jails = std::max(most_jails.load(), n);
      most_counted = std::max<int>(most_counted.load(), registry.box_count());
      std::this_thread::sleep_for(milliseconds(2));
    }
  });
  std::atomic<int> ok{0}, exhausted{0}, other{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 50; ++i) {
    threads.emplace_back([&] {
      auto r = registry.Create(testing::TestBoxOptions());
      if (r.ok()) {
        ++ok;
      } else if (r.status().code() == StatusCode::kResourceExhausted) {
        ++exhausted;
      } else {
        ++other;
        ADD_FAILURE() << r.status().ToString();
      }
    });
  }
  for (auto& t : threads) t.join();
  done = true;
  monitor.join();
  EXPECT_EQ(ok, 20);
  EXPECT_EQ(exhausted, 30);
  EXPECT_EQ(other, 0);
  EXPECT_LE(most_jails, 20);
  EXPECT_GT(most_jails, 0) << "the monitor should see the jails";
  EXPECT_LE(most_counted, 20);
  EXPECT_EQ(registry.List().size(), 20u);
}

TEST(BoxRegistryTest, IdleBoxIsReaped) {
  CODEBOX_SKIP_WITHOUT_BOXES();
  RegistryOptions options = TestRegistryOptions();
  options.idle_timeout = milliseconds(200);
  BoxRegistry registry(options);
  registry.Start();
  auto kept = registry.Create(testing::TestBoxOptions());
  auto idle = registry.Create(testing::TestBoxOptions());
  ASSERT_TRUE(kept.ok() && idle.ok());
  auto lease = registry.Acquire(kept->id);
  ASSERT_TRUE(lease.ok());
  EXPECT_TRUE(WaitFor([&] { return !registry.Get(idle->id).ok(); }, milliseconds(3000)));
  EXPECT_EQ(registry.Get(idle->id).status().code(), StatusCode::kNotFound);
  // A box with a lease is never idle; once the lease goes, its idle time starts.
  std::this_thread::sleep_for(milliseconds(400));
  EXPECT_TRUE(registry.Get(kept->id).ok());
  auto out = lease->box().Run("print(1)");
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  *lease = {};
  EXPECT_TRUE(WaitFor([&] { return !registry.Get(kept->id).ok(); }, milliseconds(3000)));
  EXPECT_TRUE(WaitFor([&] { return registry.box_count() == 0; }, milliseconds(3000)));
}

TEST(BoxRegistryTest, LifetimeIsCappedAtMaxLifetime) {
  CODEBOX_SKIP_WITHOUT_BOXES();
  RegistryOptions options = TestRegistryOptions();
  options.idle_timeout = kNoTimeout;
  options.max_lifetime = milliseconds(600);
  BoxRegistry registry(options);
  registry.Start();
  BoxOptions asks_more = testing::TestBoxOptions();
  asks_more.box_timeout = std::chrono::hours(5);
  auto record = registry.Create(asks_more);
  ASSERT_TRUE(record.ok()) << record.status().ToString();
  auto lease = registry.Acquire(record->id);
  ASSERT_TRUE(lease.ok());
  // Its lifetime ends even while a lease holds it, and calls then fail cleanly.
  auto r = lease->box().Exec({"sleep", "10"});
  EXPECT_TRUE(!r.ok() || !r->ok()) << "a 10 s sleep should not outlive a 600 ms lifetime";
  EXPECT_TRUE(WaitFor([&] { return !registry.Get(record->id).ok(); }, milliseconds(3000)));
  EXPECT_FALSE(lease->box().Run("print(1)").ok());
}

// E2B's setTimeout: a lifetime moves sooner or later, never past the one the box was made
// with; a shortened one ends the box.
TEST(BoxRegistryTest, SetLifetimeMovesTheEndWithinTheCeiling) {
  CODEBOX_SKIP_WITHOUT_BOXES();
  RegistryOptions options = TestRegistryOptions();
  options.idle_timeout = kNoTimeout;
  BoxRegistry registry(options);
  registry.Start();
  BoxOptions o = testing::TestBoxOptions();
  o.box_timeout = std::chrono::minutes(10);
  auto record = registry.Create(o);
  ASSERT_TRUE(record.ok()) << record.status().ToString();
  auto made = registry.LifetimeEnd(record->id);
  ASSERT_TRUE(made.ok() && made->has_value());
  auto later = registry.SetLifetime(record->id, std::chrono::hours(5));
  ASSERT_TRUE(later.ok() && later->has_value());
  EXPECT_LE(**later, **made) << "a client moved its box past the lifetime it was made with";
  auto minute = registry.SetLifetime(record->id, std::chrono::minutes(1));
  ASSERT_TRUE(minute.ok() && minute->has_value());
  auto seconds_left = std::chrono::duration_cast<std::chrono::seconds>(
      **minute - std::chrono::system_clock::now());
  EXPECT_GT(seconds_left.count(), 50);
  EXPECT_LE(seconds_left.count(), 60);
  Caller other{"other", false};
  EXPECT_EQ(registry.SetLifetime(record->id, milliseconds(1), other).status().code(),
            StatusCode::kNotFound);
  ASSERT_TRUE(registry.SetLifetime(record->id, milliseconds(200)).ok());
  EXPECT_TRUE(WaitFor([&] { return !registry.Get(record->id).ok(); }, milliseconds(3000)));
  EXPECT_EQ(registry.LifetimeEnd(record->id).status().code(), StatusCode::kNotFound);
}

// A box whose lifetime was set lives to its end however idle; the others go when idle.
TEST(BoxRegistryTest, ASetLifetimeOutlivesTheIdleTimeout) {
  CODEBOX_SKIP_WITHOUT_BOXES();
  RegistryOptions options = TestRegistryOptions();
  options.idle_timeout = milliseconds(200);
  BoxRegistry registry(options);
  registry.Start();
  BoxOptions o = testing::TestBoxOptions();
  o.box_timeout = std::chrono::minutes(10);
  auto kept = registry.Create(o);
  auto idle = registry.Create(o);
  ASSERT_TRUE(kept.ok() && idle.ok());
  ASSERT_TRUE(registry.SetLifetime(kept->id, std::chrono::minutes(1)).ok());
  EXPECT_TRUE(WaitFor([&] { return !registry.Get(idle->id).ok(); }, milliseconds(3000)));
  EXPECT_TRUE(registry.Get(kept->id).ok()) << "idle reaping ended a box whose lifetime was set";
}

TEST(BoxRegistryTest, DestroyWhileALeaseRunsAnExec) {
  CODEBOX_SKIP_WITHOUT_BOXES();
  BoxRegistry registry(TestRegistryOptions());
  auto record = registry.Create(testing::TestBoxOptions());
  ASSERT_TRUE(record.ok());
  auto lease = registry.Acquire(record->id);
  ASSERT_TRUE(lease.ok());
  StatusOr<ExecResult> result = Internal("not run");
  const auto t0 = std::chrono::steady_clock::now();
  std::thread exec([&] { result = lease->box().Exec({"sleep", "20"}); });
  std::this_thread::sleep_for(milliseconds(300));
  ASSERT_TRUE(registry.Destroy(record->id).ok());
  EXPECT_EQ(registry.Acquire(record->id).status().code(), StatusCode::kNotFound);
  exec.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  EXPECT_TRUE(!result.ok() || !result->ok()) << "the exec should end with the box";
  EXPECT_FALSE(lease->box().Run("print(1)").ok());
  EXPECT_EQ(registry.box_count(), 1u) << "the lease still holds the Box object";
  *lease = {};
  EXPECT_EQ(registry.box_count(), 0u);
}

TEST(BoxRegistryTest, TakeOneShotCountsUntilDropped) {
  CODEBOX_SKIP_WITHOUT_BOXES();
  BoxRegistry registry(TestRegistryOptions());
  bool from_pool = true;
  auto box = registry.TakeOneShot(testing::TestBoxOptions(), &from_pool);
  ASSERT_TRUE(box.ok()) << box.status().ToString();
  EXPECT_FALSE(from_pool);
  EXPECT_EQ(registry.box_count(), 1u);
  EXPECT_TRUE(registry.List().empty()) << "one-shot boxes are not registered";
  auto out = (*box)->Run("print('once')");
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, "once\n");
  const int procs = testing::CountOurBoxProcesses();
  box->reset();
  EXPECT_EQ(registry.box_count(), 0u);
  EXPECT_LT(testing::CountOurBoxProcesses(), procs);
}

int CountOurTmpEntries() { return testing::CountDirEntriesContaining("/tmp", base::OwnerTag()); }

TEST(BoxRegistryTest, ShutdownLeavesNothingBehind) {
  CODEBOX_SKIP_WITHOUT_BOXES();
  const int procs = testing::CountOurBoxProcesses();
  const int cgroups = testing::CountOurCgroups();
  const int tmp = CountOurTmpEntries();
  const int run = testing::CountDirEntries("/run/codebox-jail", testing::OurJailIdPrefix());
  RegistryOptions options = TestRegistryOptions();
  options.pools.push_back(*ParsePoolSpec("python=2", options.defaults));
  std::shared_ptr<Box> oneshot;
  BoxRegistry::Lease lease;
  {
    BoxRegistry registry(options);
    registry.Start();
    ASSERT_TRUE(registry.Create(testing::TestBoxOptions()).ok());
    auto leased = registry.Create(testing::TestBoxOptions());
    ASSERT_TRUE(leased.ok());
    lease = *registry.Acquire(leased->id);
    BoxOptions other = testing::TestBoxOptions();
    other.memory_mib = 300;
    oneshot = *registry.TakeOneShot(other, nullptr);
    ASSERT_TRUE(WaitFor([&] { return ReadyIn(registry) == 2; }));
    EXPECT_GT(testing::CountOurBoxProcesses(), procs);
    EXPECT_EQ(registry.box_count(), 5u);
    registry.Shutdown();
    registry.Shutdown();  // idempotent
    EXPECT_EQ(registry.Create(testing::TestBoxOptions()).status().code(), StatusCode::kUnavailable);
    EXPECT_TRUE(registry.List().empty());
    EXPECT_FALSE(oneshot->Run("print(1)").ok()) << "a one-shot held at shutdown is destroyed";
    EXPECT_FALSE(lease.box().Run("print(1)").ok());
  }
  oneshot.reset();
  lease = {};
  EXPECT_EQ(testing::CountOurBoxProcesses(), procs);
  EXPECT_EQ(testing::CountOurCgroups(), cgroups);
  EXPECT_EQ(CountOurTmpEntries(), tmp);
  EXPECT_EQ(testing::CountDirEntries("/run/codebox-jail", testing::OurJailIdPrefix()), run);
}

// What a server killed with -9 left is removed when the next one starts, and logged.
TEST(BoxRegistryTest, StartRemovesLeftoversOfDeadOwners) {
  // A pid and start time of a process that has ended.
  pid_t pid = ::fork();
  if (pid == 0) {
    ::pause();
    ::_exit(0);
  }
  const std::string dead = std::to_string(pid) + "-" + std::to_string(base::ProcessStartTime(pid));
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  auto home = base::MakeTempDir(base::TempRoot(), "codebox-registry-home-");
  ASSERT_TRUE(home.ok());
  const std::string stale_run = *home + "/run/vm-" + dead + "-regTest";
  const std::string live_run = *home + "/run/vm-" + base::OwnerTag() + "-regTest";
  ASSERT_TRUE(base::MakeDirs(stale_run).ok());
  ASSERT_TRUE(base::MakeDirs(live_run).ok());
  const std::string staging = jail::StagingParentPath();
  (void)::mkdir(staging.c_str(), 0711);
  const std::string stale_jail = staging + "/" + dead + "-997-0badc0de";
  ASSERT_EQ(::mkdir(stale_jail.c_str(), 0700), 0) << stale_jail;
  const std::string log = *home + "/server.log";
  ASSERT_TRUE(JsonLog::OpenFile(log).ok());

  RegistryOptions options = TestRegistryOptions();
  options.defaults.home = *home;
  BoxRegistry registry(options);
  registry.Start();
  ASSERT_TRUE(JsonLog::OpenFile("/dev/stderr").ok());
  EXPECT_FALSE(std::filesystem::exists(stale_run));
  EXPECT_FALSE(std::filesystem::exists(stale_jail));
  EXPECT_TRUE(std::filesystem::exists(live_run)) << "a live owner's directory stays";
  std::ifstream in(log);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("removed leftover"), std::string::npos) << text;
  EXPECT_NE(text.find(dead + "-997-0badc0de"), std::string::npos) << text;
  registry.Shutdown();
  EXPECT_TRUE(base::RemoveTree(*home).ok());
}

// Every call at once from many threads, with a pool refilling, the reaper reaping, and
// Shutdown arriving in the middle: no deadlock, no crash, and nothing left once all is dropped.
TEST(BoxRegistryTest, ConcurrentCallsAndShutdownMidway) {
  CODEBOX_SKIP_WITHOUT_BOXES();
  const int procs = testing::CountOurBoxProcesses();
  RegistryOptions options = TestRegistryOptions();
  options.max_boxes = 10;
  options.idle_timeout = milliseconds(50);
  options.pools.push_back(*ParsePoolSpec("python=2", options.defaults));
  auto registry = std::make_unique<BoxRegistry>(options);
  registry->Start();
  std::atomic<bool> stop{false};
  std::atomic<int> calls{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; !stop; ++i) {
        ++calls;
        switch ((t + i) % 4) {
          case 0: {
            auto r = registry->Create(testing::TestBoxOptions());
            if (r.ok()) {
              auto lease = registry->Acquire(r->id);
              if (lease.ok()) (void)lease->box().Run("print(1)");
              if (i % 2 == 0) (void)registry->Destroy(r->id);
            }
            break;
          }
          case 1: {
            auto box = registry->TakeOneShot(testing::TestBoxOptions(), nullptr);
            if (box.ok()) (void)(*box)->Run("print(2)");
            break;
          }
          case 2:
            for (const BoxRecord& b : registry->List()) (void)registry->Acquire(b.id);
            break;
          default:
            (void)registry->CountBoxes();
            (void)registry->Pools();
            (void)registry->box_count();
        }
      }
    });
  }
  std::this_thread::sleep_for(milliseconds(1500));
  registry->Shutdown();
  std::this_thread::sleep_for(milliseconds(300));  // calls keep coming after it
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_GT(calls, 50);
  EXPECT_EQ(registry->box_count(), 0u);
  registry.reset();
  EXPECT_EQ(testing::CountOurBoxProcesses(), procs);
}

}  // namespace
}  // namespace codebox::server
