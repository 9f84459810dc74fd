// What the tests share: the codebox program (CODEBOX_BIN, else the build tree scripts/test
// builds, build/release), a `codebox serve` of the test's own, waits with deadlines.
import { spawn } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

if (!process.env.CODEBOX_BIN) {
  const built = join(ROOT, "build", "release", "bin", "codebox");
  if (existsSync(built)) process.env.CODEBOX_BIN = built;
}
export const CODEBOX = process.env.CODEBOX_BIN;

/** The reason the box tests cannot run here, or null. CI sets CODEBOX_TESTS_REQUIRE_BOX=1,
 * and then a missing program fails instead of skipping. */
export function skipReason() {
  if (CODEBOX && existsSync(CODEBOX)) return null;
  const why = `no codebox program (set CODEBOX_BIN, or build ${join(ROOT, "build", "release")})`;
  if (process.env.CODEBOX_TESTS_REQUIRE_BOX === "1") throw new Error(why);
  return why;
}

// Every temporary directory of a test file goes when its process ends.
const tempDirs = [];
process.on("exit", () => {
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
});

export function tempDir(prefix = "codebox-js-test-") {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  tempDirs.push(dir);
  return dir;
}

/** Polls `check` every 50 ms until it is true; false after `ms`. */
export async function waitFor(check, ms = 15_000) {
  for (const end = Date.now() + ms; Date.now() < end;) {
    if (await check()) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return false;
}

export function processAlive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Starts `codebox serve` on loopback TCP with a token file; answers {address, token, child,
 * stop()}. `args` adds flags. */
export async function startTcpServer(args = []) {
  const dir = tempDir("codebox-js-serve-");
  const token = "test-token-" + Math.random().toString(16).slice(2);
  const tokens = join(dir, "tokens");
  writeFileSync(tokens, token + "\n");
  chmodSync(tokens, 0o600);
  const child = spawn(CODEBOX, ["serve", "--listen", "127.0.0.1:0", "--token-file", tokens, "--drain", "1", "--log-format", "text", ...args], { stdio: ["ignore", "pipe", "pipe"] });
  let err = "";
  child.stderr.on("data", (c) => { err = (err + c).slice(-4000); });
  const address = await new Promise((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error("codebox serve did not listen within 30 s: " + err)), 30_000);
    child.stdout.on("data", (c) => {
      out += c;
      const m = /listening on 127\.0\.0\.1:(\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(`http://127.0.0.1:${m[1]}`);
      }
    });
    child.once("exit", (code) => { clearTimeout(timer); reject(new Error(`codebox serve exited ${code}: ${err}`)); });
  });
  const exited = new Promise((r) => child.once("exit", r));
  return {
    address,
    token,
    child,
    async stop(signal = "SIGTERM") {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await Promise.race([exited, new Promise((r) => setTimeout(r, 20_000))]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
