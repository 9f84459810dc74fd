// Box::InstallPackages in real jail boxes: pip through the box's proxy from a package index
// on the host's loopback (a wheel the test makes), allowed for the install only; and the
// images carry pip and curl.
#include <string>

#include "tests/box/egress_box_util.h"

namespace codebox {
namespace {

using namespace testing;  // NOLINT: the egress test helpers

TEST(BoxInstallTest, TheImagesCarryPipAndCurl) {
  for (const char* image : {"python", "python-data"}) {
    BoxOptions o = TestBoxOptions();
    o.image = image;
    CODEBOX_MAKE_BOX_OR_SKIP(box, o);
    auto r = box->Exec({"sh", "-c", "python3 -m pip --version >/dev/null && curl --version"});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->exit_code, 0) << image << ": " << r->stderr_data;
    EXPECT_EQ(r->stdout_data.rfind("curl ", 0), 0u) << image << ": " << r->stdout_data;
  }
}

// A wheel made with zipfile (in a box without a network: nothing of the host's Python is
// needed) and a PEP 503 index of it on the host's loopback.
constexpr char kWheel[] = "codeboxprobe-1.0-py3-none-any.whl";
constexpr char kMakeWheel[] = R"(
import base64, hashlib, zipfile
info = 'codeboxprobe-1.0.dist-info/'
files = {
    'codeboxprobe.py': b'VALUE = 42\n',
    info + 'METADATA': b'Metadata-Version: 2.1\nName: codeboxprobe\nVersion: 1.0\n',
    info + 'WHEEL': b'Wheel-Version: 1.0\nGenerator: codebox-test\nRoot-Is-Purelib: true\n'
                    b'Tag: py3-none-any\n',
}
def digest(b):
    return 'sha256=' + base64.urlsafe_b64encode(hashlib.sha256(b).digest()).rstrip(b'=').decode()
record = ''.join(f'{p},{digest(b)},{len(b)}\n' for p, b in files.items()) + info + 'RECORD,,\n'
files[info + 'RECORD'] = record.encode()
with zipfile.ZipFile('/work/codeboxprobe-1.0-py3-none-any.whl', 'w') as z:
    for p, b in files.items():
        z.writestr(p, b)
)";

TEST(BoxInstallTest, InstallPackagesFromALocalIndexThenImport) {
  std::string wheel;
  {
    CODEBOX_MAKE_BOX_OR_SKIP(maker, TestBoxOptions());
    auto made = maker->RunPython(kMakeWheel);
    ASSERT_TRUE(made.ok() && made->exit_code == 0) << (made.ok() ? made->stderr_data : "");
    auto data = maker->ReadFile(std::string("/work/") + kWheel);
    ASSERT_TRUE(data.ok()) << data.status().ToString();
    wheel = std::move(*data);
  }
  HttpTestServer index([&](const std::string& path) -> std::optional<std::string> {
    if (path == "/simple/codeboxprobe/") {
      return std::string("<html><body><a href=\"/files/") + kWheel + "\">" + kWheel +
             "</a></body></html>\n";
    }
    if (path == std::string("/files/") + kWheel) return wheel;
    return std::nullopt;
  });
  ASSERT_TRUE(index.ok());
  BoxOptions o = TestBoxOptions();
  o.network = NetworkMode::kAllow;  // no hosts: only the index, during the install
  CODEBOX_MAKE_BOX_OR_SKIP(box, o);
  const std::string index_url = "http://" + index.where() + "/simple";

  auto missing = box->InstallPackages({"no-such-package"}, {.index_url = index_url});
  ASSERT_TRUE(missing.ok()) << missing.status().ToString();
  EXPECT_NE(missing->exit_code, 0);
  EXPECT_NE(missing->stderr_data.find("No matching distribution"), std::string::npos)
      << missing->stderr_data;

  auto installed = box->InstallPackages({"codeboxprobe"}, {.index_url = index_url});
  ASSERT_TRUE(installed.ok()) << installed.status().ToString();
  EXPECT_EQ(installed->exit_code, 0) << installed->stdout_data << installed->stderr_data;
  auto imported = box->Run("import codeboxprobe; print(codeboxprobe.VALUE)");
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  EXPECT_EQ(*imported, "42\n");
  bool fetched_wheel = false;
  for (const EgressRecord& r : RecordsFor(*box, static_cast<uint16_t>(index.port()))) {
    EXPECT_TRUE(r.allowed) << r.reason;
    fetched_wheel = fetched_wheel || r.bytes_down >= wheel.size();
  }
  EXPECT_TRUE(fetched_wheel);

  // The index was allowed for the installs only.
  const int requests = index.requests();
  std::string after = Curl(*box, index_url + "/codeboxprobe/", "-i");
  EXPECT_NE(after.find("403 Forbidden"), std::string::npos) << after;
  EXPECT_EQ(index.requests(), requests);
}

TEST(BoxInstallTest, InstallPackagesRefusesWhatPipWouldTakeAsAnOption) {
  BoxOptions o = TestBoxOptions();
  o.network = NetworkMode::kAllow;
  CODEBOX_MAKE_BOX_OR_SKIP(box, o);
  for (const std::string& bad : {std::string("-r/etc/passwd"), std::string("--index-url=x"),
                                 std::string("pkg; rm -rf /"), std::string("")}) {
    auto r = box->InstallPackages({"ok-name", bad});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  auto r = box->InstallPackages({"x"}, {.index_url = "ftp://127.0.0.1/simple"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("index_url"), std::string::npos);
  EXPECT_TRUE(box->EgressLog().empty());
}

}  // namespace
}  // namespace codebox
