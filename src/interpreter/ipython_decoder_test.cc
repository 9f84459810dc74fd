// KernelDecoder against what a hostile cell can write to the kernel's protocol fd.
#include "interpreter/ipython_decoder.h"

#include <gtest/gtest.h>

#include <string>

namespace codebox::interpreter {
namespace {

constexpr char kReady[] = R"({"type":"ready","protocol":1,"pid":7,"ipython":"8.5.0"})"
                          "\n";

// A decoder that saw `ready` and collects cell 1.
KernelDecoder Started(uint64_t limit = 1000) {
  KernelDecoder d(limit);
  EXPECT_TRUE(d.Feed(kReady).ok());
  d.BeginCell(1);
  return d;
}

TEST(KernelDecoder, CollectsACell) {
  KernelDecoder d = Started();
  ASSERT_TRUE(
      d.Feed(
           R"({"type":"stream","id":1,"name":"stdout","text":"hi\n"})"
           "\n"
           R"({"type":"stream","id":1,"name":"stderr","text":"warn"})"
           "\n"
           R"({"type":"display","id":1,"main":false,"data":{"text/html":"<b>x</b>","application/json":"{\"a\": [1]}"}})"
           "\n"
           R"({"type":"display","id":1,"main":true,"data":{"text/plain":"2","image/png":"iVBORw0KGgo=\n"}})"
           "\n"
           R"({"type":"error","id":1,"name":"ValueError","value":"bad","traceback":"tb"})"
           "\n")
          .ok());
  EXPECT_FALSE(d.cell_done());
  ASSERT_TRUE(d.Feed(R"({"type":"done","id":1,"execution_count":3})"
                     "\n")
                  .ok());
  ASSERT_TRUE(d.cell_done());
  Execution& e = d.execution();
  EXPECT_EQ(e.stdout_chunks, std::vector<std::string>{"hi\n"});
  EXPECT_EQ(e.stderr_chunks, std::vector<std::string>{"warn"});
  ASSERT_EQ(e.results.size(), 2u);
  EXPECT_EQ(*e.results[0].Get("application/json"), "{\"a\": [1]}");
  EXPECT_FALSE(e.results[0].is_main_result);
  EXPECT_EQ(e.text(), "2");
  ASSERT_TRUE(e.error.has_value());
  EXPECT_EQ(e.error->name, "ValueError");
  EXPECT_EQ(e.execution_count, 3);
  EXPECT_FALSE(e.output_truncated);
  EXPECT_EQ(d.TakeEmits().size(), 4u);
}

TEST(KernelDecoder, LinesMayArriveInPieces) {
  KernelDecoder d(1000);
  std::string all = std::string(kReady) + R"({"type":"done","id":1,"execution_count":1})"
                                          "\n";
  d.BeginCell(1);
  for (char c : all) ASSERT_TRUE(d.Feed(std::string_view(&c, 1)).ok());
  EXPECT_TRUE(d.ready());
  EXPECT_TRUE(d.cell_done());
}

TEST(KernelDecoder, DropsOtherCellsAndUnknownMimes) {
  KernelDecoder d = Started();
  ASSERT_TRUE(d.Feed(R"({"type":"stream","id":9,"name":"stdout","text":"old"})"
                     "\n"
                     R"({"type":"display","id":1,"data":{"text/x-evil":"a","text/plain":"ok"}})"
                     "\n"
                     R"({"type":"display","id":1,"data":{"application/x-nothing":"a"}})"
                     "\n")
                  .ok());
  Execution& e = d.execution();
  EXPECT_TRUE(e.stdout_chunks.empty());
  ASSERT_EQ(e.results.size(), 1u);
  EXPECT_EQ(e.results[0].data.size(), 1u);
  EXPECT_EQ(*e.results[0].Get("text/plain"), "ok");
}

TEST(KernelDecoder, AtMostOneMainResult) {
  KernelDecoder d = Started();
  ASSERT_TRUE(d.Feed(R"({"type":"display","id":1,"main":true,"data":{"text/plain":"1"}})"
                     "\n"
                     R"({"type":"display","id":1,"main":true,"data":{"text/plain":"2"}})"
                     "\n")
                  .ok());
  ASSERT_EQ(d.execution().results.size(), 2u);
  EXPECT_TRUE(d.execution().results[0].is_main_result);
  EXPECT_FALSE(d.execution().results[1].is_main_result);
  EXPECT_EQ(d.execution().text(), "1");
}

TEST(KernelDecoder, CapsOutputPerCell) {
  KernelDecoder d = Started(10);
  ASSERT_TRUE(d.Feed(R"({"type":"stream","id":1,"name":"stdout","text":"12345678"})"
                     "\n"
                     R"({"type":"stream","id":1,"name":"stdout","text":"abcdef"})"
                     "\n"
                     R"({"type":"display","id":1,"data":{"text/plain":"too big"}})"
                     "\n")
                  .ok());
  Execution& e = d.execution();
  ASSERT_EQ(e.stdout_chunks.size(), 2u);
  EXPECT_EQ(e.stdout_chunks[1], "ab");
  EXPECT_TRUE(e.results.empty());
  EXPECT_TRUE(e.output_truncated);
  // The next cell has its own budget.
  d.BeginCell(2);
  ASSERT_TRUE(d.Feed(R"({"type":"stream","id":2,"name":"stdout","text":"fresh"})"
                     "\n")
                  .ok());
  EXPECT_EQ(d.execution().stdout_chunks, std::vector<std::string>{"fresh"});
  EXPECT_FALSE(d.execution().output_truncated);
}

TEST(KernelDecoder, CapsTheNumberOfPiecesPerCell) {
  // One-byte prints cost the host far more than a byte each: their count is capped too.
  KernelDecoder d = Started(1 << 20);
  std::string lines;
  for (int i = 0; i < 20000; ++i) {
    lines += R"({"type":"stream","id":1,"name":"stdout","text":"x"})"
             "\n";
  }
  ASSERT_TRUE(d.Feed(lines).ok());
  EXPECT_EQ(d.execution().stdout_chunks.size(), (1u << 20) / kItemBytes);
  EXPECT_TRUE(d.execution().output_truncated);
}

TEST(KernelDecoder, CutsTextAtACharacterBoundary) {
  KernelDecoder d = Started(4);
  // "aé€": 1 + 2 + 3 bytes; 4 bytes of room keep "aé" (3 bytes), never half of "€".
  ASSERT_TRUE(
      d.Feed("{\"type\":\"stream\",\"id\":1,\"name\":\"stdout\",\"text\":\"a\\u00e9\\u20ac\"}\n")
          .ok());
  EXPECT_EQ(d.execution().stdout_chunks, std::vector<std::string>{"a\xc3\xa9"});
}

// A chart (or application/json) nested past 64 levels is refused, not parsed down to its end.
TEST(KernelDecoder, RefusesDeeplyNestedJsonResults) {
  for (const char* mime : {"application/json", kChartMime}) {
    KernelDecoder d = Started(1 << 20);
    const std::string deep = std::string(10000, '[') + std::string(10000, ']');
    const std::string line = "{\"type\":\"display\",\"id\":1,\"data\":{\"" + std::string(mime) +
                             "\":\"" + deep + "\"}}\n";
    EXPECT_FALSE(d.Feed(line).ok()) << mime;
  }
}

// Each of these ends the kernel: the decoder says why and stays broken.
TEST(KernelDecoder, RefusesMalformedLines) {
  const char* bad[] = {
      "garbage\n",
      "[1,2]\n",
      "{\"type\":5}\n",
      "{\"type\":\"launch\"}\n",
      "{\"type\":\"stream\",\"id\":\"1\",\"name\":\"stdout\",\"text\":\"x\"}\n",
      "{\"type\":\"stream\",\"id\":1,\"name\":\"stdin\",\"text\":\"x\"}\n",
      "{\"type\":\"stream\",\"id\":1,\"name\":\"stdout\",\"text\":7}\n",
      "{\"type\":\"display\",\"id\":1,\"data\":[]}\n",
      "{\"type\":\"display\",\"id\":1,\"data\":{\"text/plain\":{\"a\":1}}}\n",
      "{\"type\":\"display\",\"id\":1,\"data\":{\"image/png\":\"<script>\"}}\n",
      "{\"type\":\"display\",\"id\":1,\"data\":{\"application/json\":\"{nope\"}}\n",
      "{\"type\":\"display\",\"id\":1,\"data\":{\"application/vnd.codebox.chart+json\":\"[1\"}}\n",
      "{\"type\":\"display\",\"id\":1,\"main\":\"yes\",\"data\":{}}\n",
      "{\"type\":\"done\",\"id\":1,\"execution_count\":-4}\n",
      "{\"type\":\"done\",\"id\":1,\"execution_count\":1e400}\n",
      "{\"type\":\"ready\",\"protocol\":1}\n",
      "{\"type\":\"stream\",\"id\":1,\"name\":\"stdout\",\"text\":\"\xff\xfe\"}\n",
  };
  for (const char* line : bad) {
    KernelDecoder d = Started();
    Status st = d.Feed(line);
    EXPECT_FALSE(st.ok()) << line;
    EXPECT_FALSE(d.Feed(R"({"type":"done","id":1,"execution_count":1})"
                        "\n")
                     .ok())
        << line;
    EXPECT_FALSE(d.cell_done()) << line;
  }
}

TEST(KernelDecoder, RefusesAnOversizedLineWithoutBufferingIt) {
  KernelDecoder d = Started(100);
  std::string chunk(1 << 20, 'x');
  Status st;
  uint64_t fed = 0;
  while (st.ok() && fed <= d.max_line() + chunk.size()) {
    st = d.Feed(chunk);
    fed += chunk.size();
  }
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("longer than"), std::string::npos) << st.message();
  EXPECT_LE(fed, d.max_line() + chunk.size());
}

TEST(KernelDecoder, CellOutputBeforeReadyIsRefused) {
  KernelDecoder d(100);
  d.BeginCell(1);
  EXPECT_FALSE(d.Feed(R"({"type":"done","id":1,"execution_count":1})"
                      "\n")
                   .ok());
}

TEST(KernelDecoder, ReportsFatal) {
  KernelDecoder d(100);
  ASSERT_TRUE(d.Feed(R"({"type":"fatal","kind":"no_ipython","message":"No module named 'IPython'"})"
                     "\n")
                  .ok());
  ASSERT_TRUE(d.fatal().has_value());
  EXPECT_EQ(d.fatal()->kind, "no_ipython");
  EXPECT_FALSE(d.ready());
}

}  // namespace
}  // namespace codebox::interpreter
