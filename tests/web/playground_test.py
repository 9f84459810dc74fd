#!/usr/bin/env python3
"""The playground at / of `codebox serve`, in headless Chromium driven by Selenium.

usage: playground_test.py CODEBOX FAKE_OPENAI_SERVER SCENARIO OUT_DIR
  (exit 77 = skipped, with the reason; CODEBOX_TESTS_REQUIRE_BOX=1 makes a skip a failure)

Starts a scripted model (tests/llm/fake_openai_server.py) and `codebox serve --listen
127.0.0.1:0 --image python-data --model ... --base-url ...`, loads the page and: runs a cell
that prints (Shift+Enter), one that plots (the chart's <img> has a natural size), one that
raises (the traceback shows), one whose HTML and text try to run script in the page (they must
not), uploads a file and reads it from a cell, lists and downloads a file of /work, restarts
the kernel, asks in the chat tab (code, output and answer show; the API key reaches the model
and nothing else), and checks that the boxes are gone when the page is. Then, on a server with
--token-file and no model: the page asks for the token and works with it, and the chat says how
to configure a model. Screenshots go to OUT_DIR (playground-notebook.png is the one in docs/).
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

SKIP = 77
API_KEY = "sk-playground-test-key-8c1f"  # must reach the model server and nothing else


def skip(reason):
    if os.environ.get("CODEBOX_TESTS_REQUIRE_BOX") == "1":
        print(f"FAIL (CODEBOX_TESTS_REQUIRE_BOX=1, so this may not skip): {reason}")
        sys.exit(1)
    print(f"SKIP: {reason}")
    sys.exit(SKIP)


try:
    from selenium import webdriver
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError as e:
    skip(f"selenium is missing for {sys.executable} ({e}); install python3-selenium")

CODEBOX, FAKE_SERVER, SCENARIO, OUT_DIR = (os.path.abspath(a) for a in sys.argv[1:5])


def check_host():
    for program, package in (("chromium", "chromium"), ("chromedriver", "chromium-driver")):
        if not shutil.which(program):
            skip(f"{program} is not installed (Debian package {package})")
    if os.geteuid() != 0:
        skip("needs root for jail boxes")
    probe = subprocess.run(
        [CODEBOX, "run", "--local", "--driver", "jail", "--image", "python-data",
         "import IPython, matplotlib"], capture_output=True, text=True, timeout=180)
    if probe.returncode != 0:
        skip(f"a python-data jail box with IPython and matplotlib does not run here "
             f"(codebox image build python-data): {probe.stderr.strip()}")


def read_line(proc, prefix, timeout):
    """The first line of proc's stdout that starts with prefix, within timeout seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit(f"FAIL: {proc.args[0]} exited ({proc.wait()}) before printing {prefix!r}")
        if line.startswith(prefix):
            return line
    raise SystemExit(f"FAIL: no {prefix!r} line within {timeout} s")


class Page:
    """The browser on the playground, with bounded waits that fail with what was awaited."""

    def __init__(self, driver, base):
        self.driver = driver
        self.base = base

    def wait(self, what, condition, timeout=60):
        try:
            return WebDriverWait(self.driver, timeout, poll_frequency=0.1).until(lambda d: condition())
        except TimeoutException:
            self.shot("failure")
            raise SystemExit(f"FAIL: waited {timeout} s for {what}; see {OUT_DIR}/failure.png\n"
                             f"console: {self.console()}")

    def find(self, css, within=None):
        return (within or self.driver).find_element(By.CSS_SELECTOR, css)

    def find_all(self, css, within=None):
        return (within or self.driver).find_elements(By.CSS_SELECTOR, css)

    def shot(self, name):
        self.driver.save_screenshot(os.path.join(OUT_DIR, name + ".png"))

    def console(self):
        try:
            return [e["message"] for e in self.driver.get_log("browser")]
        except Exception:  # noqa: BLE001 - only for the failure message
            return []

    def run_cell(self, code, timeout=120):
        """Types code into the last cell, runs it with Shift+Enter, waits for it to finish."""
        cell = self.find_all(".cell")[-1]
        area = self.find("textarea", cell)
        area.clear()
        area.send_keys(code)
        area.send_keys(Keys.SHIFT, Keys.ENTER)
        status = self.find(".cell-status", cell)
        self.wait(f"the cell {code!r} to finish",
                  lambda: " ms in " in status.text or status.text == "failed", timeout)
        return cell

    def text_of(self, css, cell):
        return "".join(e.text for e in self.find_all(css, cell))


def api(base, method, path, token=None):
    headers = {"Authorization": "Bearer " + token} if token else {}
    request = urllib.request.Request(base + path, method=method, headers=headers)
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read() or b"null")


def notebook(page, work):
    # The isolation shows as soon as the box is made.
    page.wait("the box's isolation", lambda: page.find("#isolation").text == "jail", 120)

    cell = page.run_cell("x = 41\nprint('hello from', 'the box')")
    assert page.text_of("pre.stdout", cell) == "hello from the box", page.text_of("pre.stdout", cell)
    assert page.find(".prompt", cell).text == "[1]", page.find(".prompt", cell).text
    # Shift+Enter made the next cell; it shares the kernel.
    cell = page.run_cell("x + 1")
    assert page.text_of("pre.result-text", cell) == "42", page.text_of("pre.result-text", cell)

    cell = page.run_cell("import matplotlib.pyplot as plt\n"
                         "plt.figure(figsize=(6, 3))\n"
                         "plt.plot([0, 1, 4, 9, 16, 25], marker='o')\n"
                         "plt.title('squares')\n"
                         "plt.show()")
    image = page.wait("the chart's <img>", lambda: page.find_all("img.result-image", cell), 30)[0]
    page.wait("the chart to load", lambda: page.driver.execute_script(
        "return arguments[0].complete && arguments[0].naturalWidth > 0", image), 30)
    width, height = page.driver.execute_script(
        "return [arguments[0].naturalWidth, arguments[0].naturalHeight]", image)
    assert width > 100 and height > 50, (width, height)
    page.shot("playground-notebook")

    cell = page.run_cell("def f():\n    return 1 / 0\nf()")
    traceback = page.text_of("pre.traceback", cell)
    assert "ZeroDivisionError" in traceback and "division by zero" in traceback, traceback

    # Hostile output: HTML and text that try to run script in the page must not.
    cell = page.run_cell(
        "from IPython.display import HTML, display\n"
        "display(HTML('<b id=\"pwn-html\">table</b><img src=x onerror=\"parent.document.title=1\">'"
        "'<script>parent.document.title = \"pwned\"</script>'))\n"
        "print('<img src=x onerror=\"document.title=2\"><b id=\"pwn-text\">text</b>')")
    frame = page.wait("the HTML frame", lambda: page.find_all("iframe.result-html", cell), 30)[0]
    assert frame.get_attribute("sandbox") == "", frame.get_attribute("sandbox")
    assert "<b id=" in page.text_of("pre.stdout", cell), page.text_of("pre.stdout", cell)
    time.sleep(0.5)
    assert page.driver.title == "codebox playground", page.driver.title
    assert not page.find_all("#pwn-html, #pwn-text"), "box output became part of the page"
    page.driver.switch_to.frame(frame)
    assert page.find("#pwn-html").text == "table"
    page.driver.switch_to.default_content()

    # A flood of output: the page shows the first MiB and counts the rest, and stays usable.
    cell = page.run_cell("for i in range(40):\n    print('y' * 49999)")
    shown = page.driver.execute_script(
        "return arguments[0].querySelector('pre.stdout').firstChild.length", cell)
    assert shown == 1 << 20, shown
    assert "[... 951424 more characters not shown]" in page.text_of("pre.stdout .note", cell), \
        page.text_of("pre.stdout .note", cell)

    # Upload into /data and read it from a cell.
    upload = os.path.join(work, "numbers.csv")
    with open(upload, "w") as f:
        f.write("n,square\n3,9\n4,16\n")
    page.find("#upload").send_keys(upload)
    page.wait("the upload", lambda: page.find("#upload-status").text.startswith(
        "uploaded /data/numbers.csv"), 30)
    cell = page.run_cell("import pandas as pd\n"
                         "df = pd.read_csv('/data/numbers.csv')\n"
                         "print(int(df.square.sum()))\n"
                         "open('/work/report.txt', 'w').write('sum=' + str(df.square.sum()))\n"
                         "df")
    assert page.text_of("pre.stdout", cell) == "25", page.text_of("pre.stdout", cell)
    assert page.find_all("iframe.result-html", cell), "the DataFrame's table is not shown"

    # List /work and download the file the cell wrote.
    page.find("#list-files").click()
    link = page.wait("report.txt in the /work list", lambda: [
        b for b in page.find_all("#file-list button.link") if b.text == "report.txt"], 30)[0]
    link.click()
    saved = os.path.join(work, "downloads", "report.txt")
    page.wait("the download", lambda: os.path.exists(saved) and open(saved).read() == "sum=25", 30)

    # Restart: variables are gone.
    page.find("#restart").click()
    page.wait("the restart notice", lambda: "Kernel restarted" in page.find("#notice").text, 60)
    cell = page.run_cell("x")
    assert "NameError" in page.text_of("pre.traceback", cell), page.text_of("pre.traceback", cell)


def chat(page, model_log):
    page.find("#tab-chat").click()
    page.find("#chat-input").send_keys("What is the sum of 0..9?")
    page.find("#chat-send").click()
    answer = page.wait("the chat's answer", lambda: page.find_all(".chat-answer"), 180)[0]
    assert answer.text == "The sum of 0..9 is 45.", answer.text
    turn = page.find_all(".chat-turn")[-1]
    code = page.text_of("pre.chat-code", turn)
    assert "total = sum(range(10))" in code, code
    out = page.text_of(".chat-output pre.stdout", turn)
    assert "total 45" in out and "key in the box: False" in out, out
    assert page.find_all("img.result-image", turn), "the chat's chart is not shown"
    assert "running in a jail box" in turn.text, turn.text
    assert "/tmp" not in turn.text, "a host path reached the page: " + turn.text
    page.shot("playground-chat")
    # The key went to the model endpoint, and nowhere in the page.
    with open(model_log) as f:
        requests = [json.loads(line) for line in f]
    assert requests and all(r["headers"].get("Authorization") == "Bearer " + API_KEY
                            for r in requests), requests
    assert API_KEY not in page.driver.page_source


def with_token(page, base, token):
    """A server with --token-file: the page loads, asks for the token, then works; the chat
    of a server without --model says how to configure one."""
    page.driver.get(base + "/")
    page.wait("the token prompt", lambda: page.find("#token-bar").is_displayed(), 30)
    assert "token" in page.find("#token-message").text, page.find("#token-message").text
    page.find("#token-input").send_keys(token)
    page.find("#token-input").send_keys(Keys.ENTER)
    page.wait("the box's isolation", lambda: page.find("#isolation").text == "jail", 120)
    cell = page.run_cell("print(6 * 7)")
    assert page.text_of("pre.stdout", cell) == "42", page.text_of("pre.stdout", cell)
    page.find("#tab-chat").click()
    page.find("#chat-input").send_keys("anything")
    page.find("#chat-send").click()
    error = page.wait("the chat's error", lambda: page.find_all(".chat-turn .error"), 30)[0]
    assert "--model" in error.text and "--base-url" in error.text, error.text
    page.driver.get("about:blank")
    page.wait("the page's box to be destroyed",
              lambda: not api(base, "GET", "/v1/boxes", token)["boxes"], 30)


def start_serve(args, log_name, env=None):
    """codebox serve on a loopback port of its choosing: the process and its base URL."""
    serve = subprocess.Popen(
        [CODEBOX, "serve", "--listen", "127.0.0.1:0", "--driver", "jail", "--image",
         "python-data", "--log-format", "text", *args],
        stdout=subprocess.PIPE, stderr=open(os.path.join(OUT_DIR, log_name), "w"),
        text=True, env=env)
    line = read_line(serve, "codebox serve: listening on ", 60)
    return serve, "http://" + line.split("listening on ")[1].split(";")[0].strip()


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def start_browser(work):
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                "--window-size=1300,1000", "--disable-gpu"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    options.add_experimental_option("prefs", {
        "download.default_directory": os.path.join(work, "downloads"),
        "download.prompt_for_download": False})
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    driver.set_page_load_timeout(30)
    driver.set_script_timeout(30)
    return driver


def main():
    check_host()
    os.makedirs(OUT_DIR, exist_ok=True)
    work = tempfile.mkdtemp(prefix="playground_test.")
    model_log = os.path.join(work, "model.jsonl")
    model = subprocess.Popen([sys.executable, FAKE_SERVER, "--script", SCENARIO, "--log", model_log,
                              "--max-seconds", "600"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    servers = []
    driver = None
    try:
        port = int(read_line(model, "PORT ", 30).split()[1])
        serve, base = start_serve(["--model", "fake-model", "--base-url",
                                   f"http://127.0.0.1:{port}/v1"], "serve.log",
                                  dict(os.environ, OPENAI_API_KEY=API_KEY))
        servers.append(serve)
        driver = start_browser(work)
        page = Page(driver, base)
        driver.get(base + "/")
        notebook(page, work)
        chat(page, model_log)
        # Nothing the page ran into may break its own policy (a CSP violation is a bug).
        console = page.console()
        if os.environ.get("PLAYGROUND_TEST_VERBOSE"):
            print("\n".join(console))
        errors = [m for m in console if "Content Security Policy" in m]
        assert not errors, errors

        # The ask's box is gone; the notebook's box goes with the page.
        boxes = api(base, "GET", "/v1/boxes")["boxes"]
        assert len(boxes) == 1, boxes
        driver.get("about:blank")
        page.wait("the page's box to be destroyed",
                  lambda: not api(base, "GET", "/v1/boxes")["boxes"], 30)

        token = "playground-browser-token"
        token_file = os.path.join(work, "tokens")
        with open(os.open(token_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write(token + "\n")
        serve, base = start_serve(["--token-file", token_file], "serve-token.log")
        servers.append(serve)
        with_token(Page(driver, base), base, token)
        print("PASS: playground notebook, files, restart, chat and token in headless Chromium; "
              f"screenshots in {OUT_DIR}")
    finally:
        if driver:
            driver.quit()
        for serve in servers:
            stop(serve)
        model.stdin.close()
        try:
            model.wait(timeout=10)
        except subprocess.TimeoutExpired:
            model.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
