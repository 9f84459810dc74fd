// Runs `print(1+1)` in a fresh box and prints what came out and which driver ran it.
#include <cstdio>

#include "codebox/box.h"

int main() {
  auto box = codebox::Box::Create({.image = "python"});
  if (!box.ok()) {
    std::fprintf(stderr, "hello_box: %s\n", box.status().ToString().c_str());
    return 1;
  }
  auto result = (*box)->RunPython("print(1+1)");
  if (!result.ok()) {
    std::fprintf(stderr, "hello_box: %s\n", result.status().ToString().c_str());
    return 1;
  }
  std::printf("result: %s", result->stdout_data.c_str());
  std::printf("driver: %s\n", result->driver.c_str());
  return result->exit_code == 0 ? 0 : 1;
}
