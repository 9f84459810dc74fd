// Box::RunCode with the data stack (the `python-data` image: numpy, pandas, matplotlib):
// charts come back as PNGs the host decodes, DataFrames as HTML; and the basics under the vm
// driver (QEMU tcg here; skipped without qemu or a guest kernel).
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "testing/box_test_util.h"
#include "tests/box/kernel_test_util.h"
#include "tests/box/png_test_util.h"

namespace codebox {
namespace {

using namespace std::chrono_literals;
using testing::RunOk;

BoxOptions DataOptions() {
  BoxOptions options = testing::TestBoxOptions();
  options.image = "python-data";
  options.exec_timeout = 60s;  // the first matplotlib import builds its font cache
  return options;
}

// The PNG of the only image/png result, decoded; fails the test when there is none.
std::optional<testing::DecodedPng> OnlyPng(const Execution& e) {
  const std::string* b64 = nullptr;
  for (const CellResult& r : e.results) {
    if (const std::string* v = r.Get("image/png")) {
      EXPECT_EQ(b64, nullptr) << "more than one image/png result";
      b64 = v;
    }
  }
  if (b64 == nullptr) {
    ADD_FAILURE() << "no image/png result; error: " << (e.error ? e.error->traceback : "none");
    return std::nullopt;
  }
  auto bytes = cell_images::DecodeBase64(*b64, 32u << 20);
  if (!bytes.ok()) {
    ADD_FAILURE() << "image/png does not decode: " << bytes.status().ToString();
    return std::nullopt;
  }
  std::string why;
  auto png = testing::DecodePng(*bytes, &why);
  if (!png) ADD_FAILURE() << "PNG does not decode: " << why;
  return png;
}

TEST(KernelDataTest, AFigureLeftOpenBecomesAPngOfItsSize) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, DataOptions());
  RunOk(*box, "import numpy as np\nxs = np.linspace(0, 10, 200)");
  Execution e = RunOk(*box,
                      "import matplotlib.pyplot as plt\n"
                      "fig = plt.figure(figsize=(6.4, 4.8), dpi=100)\n"
                      "plt.plot(xs, np.sin(xs), linewidth=3)\n"
                      "plt.title('sine')\n"
                      "None");
  ASSERT_FALSE(e.error) << e.error->traceback;
  auto png = OnlyPng(e);
  ASSERT_TRUE(png);
  EXPECT_EQ(png->width, 640u);
  EXPECT_EQ(png->height, 480u);
  EXPECT_GT(png->distinct_colours, 2u) << "a blank chart";
  EXPECT_GT(png->non_background, 0.005) << "a blank chart";
  EXPECT_LT(png->non_background, 0.9);
  // The figure was closed after it was sent: the next cell draws nothing.
  for (const CellResult& r : RunOk(*box, "1").results) EXPECT_EQ(r.Get("image/png"), nullptr);
}

TEST(KernelDataTest, PltShowGivesAPngAndTheDefaultSize) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, DataOptions());
  Execution e = RunOk(*box,
                      "import matplotlib.pyplot as plt\n"
                      "plt.bar(['a', 'b', 'c'], [3, 1, 2])\n"
                      "plt.show()\n"
                      "print('after show')");
  ASSERT_FALSE(e.error) << e.error->traceback;
  auto png = OnlyPng(e);
  ASSERT_TRUE(png);
  // matplotlib's defaults: 6.4 x 4.8 inches at 100 dpi.
  EXPECT_EQ(png->width, 640u);
  EXPECT_EQ(png->height, 480u);
  EXPECT_GT(png->non_background, 0.01);
  EXPECT_EQ(testing::Joined(e.stdout_chunks), "after show\n");
  // The same result carries the chart as data (docs/kernel.md, "Charts").
  const std::string* chart = nullptr;
  for (const CellResult& r : e.results) {
    if (r.Get(kChartMime) != nullptr) chart = r.Get(kChartMime);
  }
  ASSERT_NE(chart, nullptr) << "no chart with the png";
  EXPECT_NE(chart->find("\"type\": \"bar\""), std::string::npos) << *chart;
  EXPECT_NE(chart->find("\"label\": \"b\""), std::string::npos) << *chart;
}

TEST(KernelDataTest, ADataFrameGivesHtmlAndText) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, DataOptions());
  RunOk(*box,
        "import pandas as pd\ndf = pd.DataFrame({'city': ['Oslo', 'Lima'], 'temp': [4, 19]})");
  Execution e = RunOk(*box, "df");
  ASSERT_FALSE(e.error) << e.error->traceback;
  ASSERT_EQ(e.results.size(), 1u);
  const CellResult& r = e.results[0];
  EXPECT_TRUE(r.is_main_result);
  ASSERT_NE(r.Get("text/html"), nullptr);
  EXPECT_NE(r.Get("text/html")->find("<table"), std::string::npos);
  EXPECT_NE(r.Get("text/html")->find("Lima"), std::string::npos);
  EXPECT_NE(e.text().find("Oslo"), std::string::npos) << e.text();
  EXPECT_EQ(RunOk(*box, "df['temp'].sum()").text(), "23");
}

TEST(KernelVmTest, StateAcrossCellsUnderTheVmDriver) {
  BoxOptions options = testing::TestBoxOptions();
  options.driver = DriverKind::kVm;
  options.allow_emulation = true;
  options.image = "python";
  options.exec_timeout = 120s;  // IPython's first import under tcg
  CODEBOX_MAKE_BOX_OR_SKIP(box, options);
  Execution first = RunOk(*box, "x = 20\nprint('in the vm')");
  EXPECT_FALSE(first.error) << first.error->traceback;
  EXPECT_EQ(testing::Joined(first.stdout_chunks), "in the vm\n");
  Execution second = RunOk(*box, "x * 2 + 2");
  EXPECT_EQ(second.text(), "42");
  EXPECT_EQ(second.execution_count, 2);
  EXPECT_EQ(second.driver.rfind("vm/", 0), 0u) << second.driver;
}

}  // namespace
}  // namespace codebox
