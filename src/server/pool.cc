// Warm pools: parsing `--pool` specs, matching a request's options to a pool, and the threads
// that keep each pool filled with started, prewarmed boxes.
#include <algorithm>
#include <cstdlib>
#include <functional>

#include "options/option_text.h"
#include "options/options_json.h"
#include "codebox/option_schema.h"
#include "server/box_registry.h"
#include "server/box_registry_state.h"
#include "server/json_log.h"

namespace codebox::server {
namespace {

using base::LogLevel;

// The longest a failing pool waits before its next try; the first retry is after kBackoffBase.
constexpr auto kBackoffBase = std::chrono::milliseconds(500);
constexpr auto kBackoffMax = std::chrono::seconds(60);

std::vector<std::string_view> Split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t end = text.find(sep, start);
    parts.push_back(text.substr(start, end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

void AppendField(std::string* key, std::string_view name, std::string_view value) {
  *key += std::string(name) + ' ' + std::to_string(value.size()) + ' ' + std::string(value) + '\n';
}

}  // namespace

StatusOr<PoolSpec> ParsePoolSpec(std::string_view text, const BoxOptions& defaults) {
  const std::string where = "pool '" + std::string(text) + "'";
  PoolSpec spec;
  spec.text = std::string(text);
  spec.options = defaults;
  std::vector<std::string_view> parts = Split(text, ',');
  const std::string_view head = parts[0];
  const size_t eq = head.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    return InvalidArgument(where + ": '" + std::string(head) +
                           "' should be IMAGE=N, the image and how many boxes to keep ready "
                           "(e.g. python=4)");
  }
  spec.options.image = std::string(head.substr(0, eq));
  const std::string count(head.substr(eq + 1));
  char* end = nullptr;
  const long n = std::strtol(count.c_str(), &end, 10);
  if (count.empty() || end != count.c_str() + count.size() || n < 1 || n > 100'000) {
    return InvalidArgument(where + ": the size '" + count +
                           "' should be a whole number of boxes, at least 1");
  }
  spec.size = static_cast<uint32_t>(n);
  OptionValue::Environment env;
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string part(parts[i]);
    const size_t peq = part.find('=');
    if (peq == std::string::npos || peq == 0) {
      return InvalidArgument(where + ": '" + part + "' should be KEY=VALUE (e.g. memory=256)");
    }
    const std::string key = part.substr(0, peq);
    const std::string_view value = std::string_view(part).substr(peq + 1);
    if (key == "kernel") {  // not a box option: whether pool boxes start the kernel too
      static const OptionSpec kKernel{.name = "kernel", .type = OptionType::kBool};
      auto b = options::ParseOptionText(kKernel, nullptr, std::string(value));
      if (!b.ok()) return b.status().WithContext(where + ": kernel");
      spec.kernel = b->as_bool();
      continue;
    }
    OptionMatch match = FindOption(BoxOptionSchema(), key);
    if (!match) return UnknownOptionError(BoxOptionSchema(), key).WithContext(where);
    if (match.spec->name == "server" || match.spec->name == "server_token") {
      return InvalidArgument(where + ": " + key + " cannot be set for a pool: its boxes run here");
    }
    auto v = options::ParseOptionText(*match.spec, match.alias, std::string(value));
    if (!v.ok()) return v.status().WithContext(where + ": " + key);
    if (match.spec->type == OptionType::kEnvironment) {  // env=A=1,env=B=2 add up
      env.push_back(v->as_environment().at(0));
      *v = OptionValue(env);
    } else if (match.spec->type == OptionType::kList) {  // allow_hosts=a,allow_hosts=b add up
      OptionValue::List items = GetBoxOption(spec.options, match.spec->name).as_list();
      items.push_back(v->as_list().at(0));
      *v = OptionValue(std::move(items));
    }
    RETURN_IF_ERROR(SetBoxOption(&spec.options, key, *v, key).WithContext(where));
  }
  RETURN_IF_ERROR(spec.options.Validate().WithContext(where));
  return spec;
}

std::string PoolMatchKey(const BoxOptions& options) {
  std::string key = options::BoxShapeKey(options);
  for (const OptionSpec& spec : BoxOptionSchema()) {
    // prestart and the server fields do not change what a box does once started.
    if (spec.shapes_box || spec.name == "prestart" || spec.name == "server" ||
        spec.name == "server_token") {
      continue;
    }
    const OptionValue v = GetBoxOption(options, spec.name);
    if (v.kind() == OptionValue::Kind::kEnvironment) {
      std::string env;
      for (const auto& [name, value] : v.as_environment()) {
        AppendField(&env, name, value);
      }
      AppendField(&key, spec.name, env);
    } else {
      AppendField(&key, spec.name,
                  v.kind() == OptionValue::Kind::kString ? v.as_string() : FormatOptionValue(v));
    }
  }
  return key;
}

// One fill thread: picks the pool furthest below its size, starts one box for it outside the
// lock, and repeats. Waits while the server is full (pool boxes count in max_boxes), while a
// failing pool backs off, and (all but one thread) while a request is starting a box.
void BoxRegistry::State::FillLoop() {
  std::unique_lock<std::mutex> lock(mu);
  while (!stopping) {
    const auto now = Clock::now();
    Pool* pick = nullptr;
    int64_t pick_deficit = 0;
    std::optional<Clock::time_point> wake;
    uint32_t pool_starting = 0;
    for (const Pool& pool : pools) pool_starting += pool.starting;
    // Requests come first: while one starts a box, only one refill runs (not none, so a pool
    // under steady load still recovers).
    if (slots < options.max_boxes && (demand_starting == 0 || pool_starting == 0)) {
      for (Pool& pool : pools) {
        const int64_t deficit =
            int64_t{pool.spec.size} - int64_t(pool.ready.size()) - int64_t{pool.starting};
        if (deficit <= 0) continue;
        if (pool.retry_at > now) {
          wake = std::min(wake.value_or(pool.retry_at), pool.retry_at);
          continue;
        }
        if (deficit > pick_deficit) {
          pick = &pool;
          pick_deficit = deficit;
        }
      }
    }
    if (pick == nullptr) {
      if (wake) {
        cv.wait_until(lock, *wake);
      } else {
        cv.wait(lock);
      }
      continue;
    }
    Pool& pool = *pick;
    ++pool.starting;
    ++slots;
    const BoxOptions box_options = pool.options;
    const PrewarmOptions prewarm{.python = true, .kernel = pool.spec.kernel};
    lock.unlock();

    const auto t0 = Clock::now();
    const std::string id = NewRegistryBoxId(options);
    auto box = StartBox(box_options, "pool");  // releases the slot when it fails
    Status prewarmed = box.ok() ? (*box)->Prewarm(prewarm) : Status::Ok();
    std::shared_ptr<Box> discard;  // dropped after the lock is released
    if (box.ok() && !prewarmed.ok() && prewarmed.code() != StatusCode::kFailedPrecondition) {
      discard = std::move(*box);  // started but broken: its slot goes with it
      box = prewarmed.WithContext("prewarm");
    }

    lock.lock();
    --pool.starting;
    std::vector<std::function<void()>> logs;  // written after the lock is released
    const std::string pool_text = pool.spec.text;
    if (box.ok()) {
      if (pool.failures > 0) {
        logs.push_back([pool_text, failures = pool.failures] {
          JsonLog::Write(LogLevel::kInfo, "pool starts boxes again",
                         {{"pool", pool_text}, {"failures", failures}});
        });
      }
      pool.failures = 0;
      pool.last_error.clear();
      if (!prewarmed.ok() && !pool.prewarm_unavailable_logged) {
        pool.prewarm_unavailable_logged = true;  // FailedPrecondition: usable, only not warm
        logs.push_back([pool_text, id, error = prewarmed.ToString()] {
          JsonLog::Write(LogLevel::kWarn, "pool boxes are not prewarmed",
                         {{"pool", pool_text}, {"box", id}, {"error", error}});
        });
      }
      if (stopping) {
        discard = std::move(*box);
      } else {
        pool.ready.push_back({.id = id, .box = std::move(*box), .started = t0});
        logs.push_back([pool_text, id,
                        ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count()] {
          JsonLog::Write(LogLevel::kDebug, "pool box ready",
                         {{"pool", pool_text}, {"box", id}, {"ms", ms}});
        });
      }
    } else {
      ++pool.failures;
      pool.last_error = box.status().ToString();
      const auto backoff = std::min<Clock::duration>(
          kBackoffBase * (1 << std::min<uint32_t>(pool.failures - 1, 10)), kBackoffMax);
      pool.retry_at = Clock::now() + backoff;
      if (pool.failures == 1) {  // once per failure streak: a missing image must not flood
        logs.push_back([pool_text, id, error = pool.last_error] {
          JsonLog::Write(LogLevel::kError, "pool box start failed; retrying with backoff",
                         {{"pool", pool_text}, {"box", id}, {"error", error}});
        });
      }
    }
    cv.notify_all();
    lock.unlock();
    for (const auto& log : logs) log();
    discard.reset();
    lock.lock();
  }
}

}  // namespace codebox::server
