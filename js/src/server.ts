// Which codebox server a box uses: the one given (option, $CODEBOX_SERVER), else a private
// `codebox serve` of this Node process, started once and shared by all its boxes.
//
// The private server listens on a unix socket in a fresh 0700 temporary directory. It is
// started with --exit-on-stdin-eof and --private-dir: this process holds its stdin's pipe, and
// the kernel closes that pipe when the process ends, however it ends (even kill -9); the server
// then stops as on SIGTERM (destroys every box) and removes the directory.
import { spawn } from "node:child_process";
import { accessSync, constants, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { BoxStartError, ServerUnavailableError } from "./errors.js";
import { BOX_OPTION_SPECS } from "./options_table.js";
import { Transport } from "./transport.js";

const START_TIMEOUT_MS = 60_000;
const STDERR_TAIL_BYTES = 8192;

/** The private server of this process, once started. */
export interface PrivateServer {
  pid: number;
  address: string;
  dir: string;
}

let privateServer: Promise<{ server: PrivateServer; transport: Transport }> | null = null;
const transports = new Map<string, Transport>();

/** The `codebox` program: $CODEBOX_BIN, else the first on PATH. */
export function findCodebox(env = process.env): string | null {
  const candidates = env.CODEBOX_BIN ? [env.CODEBOX_BIN] : (env.PATH ?? "").split(delimiter).filter(Boolean).map((d) => join(d, "codebox"));
  for (const path of candidates) {
    try {
      accessSync(path, constants.X_OK);
      return path;
    } catch {
      // not here
    }
  }
  return null;
}

/** The transport to a given server (shared by the boxes that name it), or to the private one. */
export async function transportFor(server: string, token: string): Promise<Transport> {
  if (server === "") return (await startPrivateServer()).transport;
  const key = `${server}\n${token}`;
  let transport = transports.get(key);
  if (!transport) {
    transport = new Transport(server, token);
    transports.set(key, transport);
  }
  return transport;
}

/** The private server, when this process has started one (for tests and diagnostics). */
export async function privateServerInfo(): Promise<PrivateServer | null> {
  return privateServer ? (await privateServer).server : null;
}

function startPrivateServer(): Promise<{ server: PrivateServer; transport: Transport }> {
  if (!privateServer) {
    privateServer = launch();
    // A failed start is not cached: the next box tries again (codebox installed meanwhile).
    privateServer.catch(() => { privateServer = null; });
  }
  return privateServer;
}

// The private server is this process's own, so it grants what the option schema allows (a
// shared server's defaults would refuse, say, memoryMib 16384 or execTimeout 7200), and holds
// as many boxes as the process makes, up to serve's --max-boxes.
function privateServerFlags(): string[] {
  const ceilings: [string, string][] = [
    ["--max-memory", "memory_mib"], ["--max-disk", "disk_mib"], ["--max-output-limit", "output_limit_bytes"],
    ["--max-box-processes", "max_processes"], ["--max-box-open-files", "max_open_files"],
    ["--max-network-bytes", "network_max_bytes"],
  ];
  const flags = ["--max-exec-timeout", "none", "--idle-timeout", "none", "--max-lifetime", "none",
                 "--tenant-max-boxes", "256", "--tenant-max-requests", "512", "--max-body", "1024"];
  for (const [flag, option] of ceilings) {
    const max = BOX_OPTION_SPECS.find((s) => s.name === option)?.max;
    if (typeof max === "number") flags.push(flag, String(max));
  }
  return flags;
}

async function launch(): Promise<{ server: PrivateServer; transport: Transport }> {
  const program = findCodebox();
  if (!program) {
    throw new ServerUnavailableError(
      "no codebox server: none was given (the server option, $CODEBOX_SERVER) and no `codebox` program is on PATH to start a private one; install codebox, set CODEBOX_BIN to its program, or give a server",
      "unavailable",
    );
  }
  const dir = mkdtempSync(join(tmpdir(), "codebox-node-")); // mode 0700
  const socket = join(dir, "codebox.sock");
  const child = spawn(
    program,
    ["serve", "--listen", `unix:${socket}`, "--exit-on-stdin-eof", "--private-dir", dir,
     "--drain", "2", "--log-format", "text", ...privateServerFlags()],
    { stdio: ["pipe", "pipe", "pipe"], detached: false },
  );
  // Nothing of the server keeps this process alive: its pipes and the child are unref'd, and
  // stdin stays open (never written) until this process ends.
  let stderrTail = "";
  child.stderr!.on("data", (chunk: Buffer) => {
    stderrTail = (stderrTail + chunk.toString("utf8")).slice(-STDERR_TAIL_BYTES);
  });
  child.stdin!.on("error", () => {}); // the server gone: its end of the pipe closed
  const started = new Promise<void>((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new BoxStartError(`codebox serve (${program}) did not start within ${START_TIMEOUT_MS / 1000} s: ${stderrTail.trim().slice(-2000)}`, "start_failed"));
    }, START_TIMEOUT_MS);
    child.stdout!.on("data", (chunk: Buffer) => {
      out = (out + chunk.toString("utf8")).slice(-4096);
      if (out.includes("listening on")) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once("error", (err) => {
      clearTimeout(timer);
      reject(new BoxStartError(`could not run ${program}: ${err.message}`, "start_failed", 0, { cause: err }));
    });
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      rmSync(dir, { recursive: true, force: true });
      reject(new BoxStartError(`codebox serve (${program}) exited (${signal ?? `status ${code}`}) before it listened: ${stderrTail.trim().slice(-2000)}`, "start_failed"));
    });
  });
  for (const stream of [child.stdin, child.stdout, child.stderr] as unknown as { unref?: () => void }[]) stream.unref?.();
  child.unref();
  await started;
  child.once("exit", () => {
    // Its boxes are gone with it; the next box starts a new server.
    privateServer = null;
  });
  return {
    server: { pid: child.pid!, address: `unix:${socket}`, dir },
    transport: new Transport(`unix:${socket}`, ""),
  };
}
