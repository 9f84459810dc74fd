// What every benchmark needs: a clock in milliseconds, percentiles, and the HumanEval problems
// as programs. Header-only, bench code only.
#ifndef CODEBOX_BENCH_COMMON_BENCH_COMMON_H_
#define CODEBOX_BENCH_COMMON_BENCH_COMMON_H_

#include <algorithm>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace codebox::bench {

using Clock = std::chrono::steady_clock;

inline double Ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// The p-th quantile (0..1) of `v` (the element at floor(p * size)); -1 when empty.
inline double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

// Each HumanEval problem of the JSON-lines file at `path` as one program: prompt, canonical
// solution, its tests and the call of check(); nullopt when the file cannot be read.
inline std::optional<std::vector<std::string>> LoadHumanEvalPrograms(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::vector<std::string> programs;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line);
    programs.push_back(j["prompt"].get<std::string>() + j["canonical_solution"].get<std::string>() +
                       "\n" + j["test"].get<std::string>() + "\ncheck(" +
                       j["entry_point"].get<std::string>() + ")\n");
  }
  return programs;
}

}  // namespace codebox::bench

#endif  // CODEBOX_BENCH_COMMON_BENCH_COMMON_H_
