// SimpleBox (commands, files, processes) and CodeBox (adds Python: run, runCode and its
// session, packages): a box of a codebox server, made on first use and destroyed by stop().
import { lstatSync, readFileSync, writeFileSync } from "node:fs";
import {
  BoxClosedError,
  BoxTimeoutError,
  InvalidOptionError,
  NotFoundError,
  OutOfMemoryError,
  ProtocolError,
} from "./errors.js";
import { checkBoxOptions, checkCallTimeout, type BoxOptions, type CheckedOptions } from "./options.js";
import {
  Execution,
  Result,
  execResultFromJson,
  fileEntryFromJson,
  processInfoFromJson,
  type ExecResult,
  type FileEntry,
  type ProcessInfo,
} from "./results.js";
import { transportFor } from "./server.js";
import { packDirectory, unpackInto } from "./tar.js";
import type { Transport } from "./transport.js";

export type TextCallback = (text: string) => unknown;

/** Options of one command: `exec(cmd, ...args, options)`. */
export interface ExecOptions {
  /** Added to the box's environment for this command. */
  env?: Record<string, string>;
  /** Working directory (default the box's workdir; relative is under it). */
  cwd?: string;
  /** Seconds (default the box's execTimeout); `"none"` or Infinity: no limit. */
  timeout?: number | "none" | null;
  /** Fed to the command's stdin (else it reads /dev/null). */
  stdin?: string;
  /** `"root"` or the box's user by name (default the box's user). */
  user?: string;
  /** Each piece of output as it comes, in order, before the call answers. */
  onStdout?: TextCallback;
  onStderr?: TextCallback;
  /** Aborting it kills the command (and all it started); the call rejects with its reason. */
  signal?: AbortSignal;
}

export interface RunCodeOptions {
  /** Seconds (default the box's execTimeout): the cell is interrupted, its state kept. */
  timeout?: number | "none" | null;
  onStdout?: TextCallback;
  onStderr?: TextCallback;
  onResult?: (result: Result) => unknown;
  /** Aborting it interrupts the cell (the session keeps its state); the call rejects with
   * the signal's reason. */
  signal?: AbortSignal;
}

/** One connection of the box's egress proxy (boxes with a network). */
export interface EgressRecord {
  host: string;
  port: number;
  allowed: boolean;
  reason: string;
  address: string;
  bytesUp: number;
  bytesDown: number;
}

/** The driver running a box and the limits it enforces. */
export interface BoxInfo {
  id: string;
  image: string;
  driver: string;
  limits: string[];
  limitsNotEnforced: string[];
  network: string;
  user: string;
  state: string;
  warnings: string[];
  /** The connections its egress proxy made or refused, oldest first (the last 1000). */
  egress: EgressRecord[];
}

// Slack on top of a call's own timeout before the client gives up on the server's answer.
const ANSWER_SLACK_MS = 30_000;
const EXEC_OPTION_NAMES = ["env", "cwd", "timeout", "stdin", "user", "onStdout", "onStderr", "signal"];

/** Output of one stream of a call: kept up to the box's output limit, the rest dropped. */
class Output {
  private parts: string[] = [];
  private bytes = 0;
  truncated = false;

  constructor(private readonly limit: number, private readonly callback?: TextCallback) {}

  add(text: string): void {
    if (this.callback) this.callback(text);
    if (this.truncated) return;
    const size = Buffer.byteLength(text);
    if (this.bytes + size > this.limit) {
      const room = this.limit - this.bytes;
      this.parts.push(Buffer.from(text).subarray(0, room).toString("utf8").replace(/\uFFFD$/, ""));
      this.bytes = this.limit;
      this.truncated = true;
      return;
    }
    this.parts.push(text);
    this.bytes += size;
  }

  get text(): string {
    return this.parts.join("");
  }
}

function checkCallback(name: string, value: unknown): void {
  if (value !== undefined && typeof value !== "function") {
    throw new InvalidOptionError(`${name} must be a function, got ${typeof value}`, "invalid_argument");
  }
}

function textOf(data: Record<string, unknown>): string {
  if (typeof data.text !== "string") throw new ProtocolError("an output event without text", "protocol_error");
  return data.text;
}

/** A box for commands: exec, files, processes. Its options are checked when it is made; it
 * starts on first use (or `start()`), and `stop()` (or `await using`) destroys it. */
export class SimpleBox {
  protected readonly checked: CheckedOptions;
  private created: Promise<{ transport: Transport; id: string }> | null = null;
  private stopped = false;

  constructor(options: BoxOptions = {}) {
    this.checked = checkBoxOptions(options);
  }

  /** The box's id on its server (after it started). */
  id: string | undefined;

  /** Starts the box now (else the first call does); throws BoxStartError and its kinds. */
  async start(): Promise<this> {
    await this.live();
    return this;
  }

  protected async live(): Promise<{ transport: Transport; id: string }> {
    if (this.stopped) throw new BoxClosedError("the box has been stopped; make a new one", "closed");
    if (!this.created) {
      this.created = (async () => {
        const transport = await transportFor(this.checked.server, this.checked.token);
        const box = await transport.json("POST", "/v1/boxes", { json: this.checked.body, timeoutMs: this.checked.startTimeoutMs, creating: true });
        if (typeof box.id !== "string" || !/^b-[0-9a-f]{16}(\.[a-z0-9.-]{1,63})?$/.test(box.id)) {
          throw new ProtocolError("the server made a box without a valid id", "protocol_error");
        }
        this.id = box.id;
        if (this.stopped) await transport.request("DELETE", `/v1/boxes/${box.id}`).catch(() => {});
        return { transport, id: box.id };
      })();
      // A box that could not start (a full server, no server yet) is tried again by the next call.
      this.created.catch(() => { if (!this.id) this.created = null; });
    }
    return this.created;
  }

  protected async call<T>(body: (transport: Transport, base: string) => Promise<T>): Promise<T> {
    const { transport, id } = await this.live();
    return body(transport, `/v1/boxes/${id}`);
  }

  /** Destroys the box: every process in it ends and its files are removed. Idempotent. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    const created = this.created;
    if (!created) return;
    let box: { transport: Transport; id: string };
    try {
      box = await created;
    } catch {
      return; // it never started
    }
    try {
      await box.transport.request("DELETE", `/v1/boxes/${box.id}`);
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err; // gone already (reaped, server restarted)
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }

  /** The driver running the box and its limits. */
  async info(): Promise<BoxInfo> {
    return this.call(async (t, base) => {
      const raw = await t.json("GET", base);
      const list = (v: unknown) => (Array.isArray(v) ? v.filter((s): s is string => typeof s === "string") : []);
      const str = (v: unknown) => (typeof v === "string" ? v : "");
      const num = (v: unknown) => (typeof v === "number" ? v : 0);
      const egress = (Array.isArray(raw.egress) ? raw.egress.slice(-1000) : [])
        .filter((e): e is Record<string, unknown> => typeof e === "object" && e !== null)
        .map((e) => ({
          host: str(e.host), port: num(e.port), allowed: e.allowed === true, reason: str(e.reason),
          address: str(e.address), bytesUp: num(e.bytes_up), bytesDown: num(e.bytes_down),
        }));
      return {
        id: str(raw.id), image: str(raw.image), driver: str(raw.driver), limits: list(raw.limits),
        limitsNotEnforced: list(raw.limits_not_enforced), network: str(raw.network), user: str(raw.user),
        state: str(raw.state), warnings: list(raw.warnings), egress,
      };
    });
  }

  /** Runs a command (argv; no shell: `exec("sh", "-c", line)` for one). The last argument may
   * be ExecOptions. A non-zero exit, a timeout (`timedOut`) are results, not errors. */
  async exec(cmd: string, ...args: (string | ExecOptions)[]): Promise<ExecResult> {
    const { argv, options } = splitArgs(cmd, args);
    return this.execArgv(argv, options);
  }

  protected async execArgv(argv: string[], options: ExecOptions, route = "exec", extra: Record<string, unknown> = {}): Promise<ExecResult> {
    const request: Record<string, unknown> = { ...execRequest(argv, options), ...extra };
    if (route === "python") delete request.argv;
    const out = new Output(this.checked.outputLimitBytes, options.onStdout);
    const err = new Output(this.checked.outputLimitBytes, options.onStderr);
    const done = await this.call((t, base) =>
      t.stream(`${base}/${route}`, request, (event, data) => {
        if (event === "stdout") out.add(textOf(data));
        else if (event === "stderr") err.add(textOf(data));
      }, { timeoutMs: this.deadline(request.timeout), maxEventBytes: this.maxEventBytes(), signal: options.signal }),
    );
    return execResultFromJson(done, { stdout: out.text, stderr: err.text, truncated: out.truncated || err.truncated });
  }

  /** How long to wait for a call's answer: its timeout (or the box's) and some slack. */
  protected deadline(timeout: unknown): number | null {
    const seconds = timeout === undefined ? this.checked.execTimeout : timeout === "none" ? null : (timeout as number);
    return seconds === null ? null : seconds * 1000 + ANSWER_SLACK_MS;
  }

  protected maxEventBytes(): number {
    // One event: a chunk of output (at most the limit) or a cell's whole answer, which holds
    // its logs and results again; base64 and JSON escaping make text longer.
    return Math.min(4 * this.checked.outputLimitBytes + (1 << 20), 1 << 30);
  }

  /** The box's files: `read`, `readText`, `write`, `list`, `remove`. */
  readonly files = {
    /** A file's bytes (at most `maxBytes`, default 256 MiB). */
    read: (path: string, { maxBytes = 256 << 20 }: { maxBytes?: number } = {}): Promise<Buffer> =>
      this.call(async (t, base) => (await t.request("GET", `${base}/files?${query({ path })}`, { maxBytes, timeoutMs: 300_000 })).body),
    readText: async (path: string): Promise<string> => (await this.files.read(path)).toString("utf8"),
    /** Writes a file (parents made); `mode` e.g. 0o755. */
    write: (path: string, data: string | Uint8Array, { mode }: { mode?: number } = {}): Promise<void> =>
      this.call(async (t, base) => {
        const params: Record<string, string> = { path };
        if (mode !== undefined) params.mode = "0" + mode.toString(8);
        await t.request("PUT", `${base}/files?${query(params)}`, { body: typeof data === "string" ? Buffer.from(data) : data, contentType: "application/octet-stream", timeoutMs: 300_000 });
      }),
    /** A directory's entries. */
    list: (path = "."): Promise<FileEntry[]> =>
      this.call(async (t, base) => {
        const raw = await t.json("GET", `${base}/files?${query({ path, list: "1" })}`);
        if (!Array.isArray(raw.entries)) throw new ProtocolError("a listing without entries", "protocol_error");
        return raw.entries.map((e) => fileEntryFromJson(e as Record<string, unknown>));
      }),
    /** Removes a file or a directory (recursively); NotFoundError when absent. */
    remove: (path: string): Promise<void> =>
      this.call(async (t, base) => {
        await t.request("DELETE", `${base}/files?${query({ path })}`);
      }),
  };

  /** Copies a host file or directory (recursively) into the box. */
  async copyIn(hostPath: string, boxPath: string): Promise<void> {
    let st;
    try {
      st = lstatSync(hostPath);
    } catch {
      throw new NotFoundError(`copyIn: host path ${hostPath} does not exist`, "not_found");
    }
    const directory = st.isDirectory();
    const body = directory ? packDirectory(hostPath) : readFileSync(hostPath);
    await this.call((t, base) =>
      t.request("PUT", `${base}/files?${query({ path: boxPath, mode: "0" + (st.mode & 0o777).toString(8) })}`, {
        body, contentType: directory ? "application/x-tar" : "application/octet-stream", timeoutMs: 300_000,
      }),
    );
  }

  /** Copies a box file or directory to the host: regular files and directories only,
   * permission bits only; at most `maxBytes` (default 256 MiB). */
  async copyOut(boxPath: string, hostPath: string, { maxBytes = 256 << 20 }: { maxBytes?: number } = {}): Promise<void> {
    const answer = await this.call((t, base) => t.request("GET", `${base}/files?${query({ path: boxPath })}`, { maxBytes, timeoutMs: 300_000 }));
    if (String(answer.headers["content-type"]).startsWith("application/x-tar")) unpackInto(answer.body, hostPath);
    else writeFileSync(hostPath, answer.body);
  }

  /** Starts a command in the background; answers its pid in the box at once. It runs until it
   * exits, is killed or the box stops; the box keeps the last `ringBytes` of its output. */
  async spawn(cmd: string, ...args: (string | (ExecOptions & { ringBytes?: number }))[]): Promise<number> {
    const { argv, options } = splitArgs(cmd, args, ["ringBytes"]);
    if (options.signal !== undefined) {
      throw new InvalidOptionError("spawn takes no signal: its process outlives the call; kill(pid) ends it", "invalid_argument");
    }
    const request = execRequest(argv, options);
    const ring = (options as { ringBytes?: number }).ringBytes;
    if (ring !== undefined) {
      if (!Number.isInteger(ring) || ring < 0 || ring > 64 << 20) throw new InvalidOptionError(`ringBytes must be 0..${64 << 20}, got ${ring}`, "invalid_argument");
      request.ring_bytes = ring;
    }
    return this.call(async (t, base) => {
      const raw = await t.json("POST", `${base}/processes`, { json: request });
      if (typeof raw.pid !== "number") throw new ProtocolError("a started process without a pid", "protocol_error");
      return raw.pid;
    });
  }

  /** The box's processes: those running and the last that ended. */
  async processes(): Promise<ProcessInfo[]> {
    return this.call(async (t, base) => {
      const raw = await t.json("GET", `${base}/processes`);
      if (!Array.isArray(raw.processes)) throw new ProtocolError("a process list without processes", "protocol_error");
      return raw.processes.slice(0, 256).map((p) => processInfoFromJson(p as Record<string, unknown>));
    });
  }

  /** Follows a process: its output so far (what its rings hold) and to come, then its end. */
  async attach(pid: number, { onStdout, onStderr, timeout }: { onStdout?: TextCallback; onStderr?: TextCallback; timeout?: number | "none" } = {}): Promise<ExecResult> {
    checkPid(pid);
    checkCallback("onStdout", onStdout);
    checkCallback("onStderr", onStderr);
    const seconds = checkCallTimeout("timeout", timeout) ?? "none";
    const out = new Output(this.checked.outputLimitBytes, onStdout);
    const err = new Output(this.checked.outputLimitBytes, onStderr);
    const done = await this.call((t, base) =>
      t.stream(`${base}/processes/${pid}/events`, undefined, (event, data) => {
        if (event === "stdout") out.add(textOf(data));
        else if (event === "stderr") err.add(textOf(data));
      }, { timeoutMs: this.deadline(seconds), maxEventBytes: this.maxEventBytes() }, "GET"),
    );
    return execResultFromJson(done, { stdout: out.text, stderr: err.text, truncated: out.truncated || err.truncated });
  }

  /** Kills the process and everything it started; with `signal` (a number or a name such as
   * "SIGTERM") only sends that to its process group. NotFoundError when it does not run. */
  async kill(pid: number, signal?: number | string): Promise<void> {
    checkPid(pid);
    await this.call(async (t, base) => {
      if (signal === undefined) await t.request("DELETE", `${base}/processes/${pid}`);
      else {
        if (!(typeof signal === "string" || (Number.isInteger(signal) && signal >= 1 && signal <= 64))) {
          throw new InvalidOptionError(`signal must be 1..64 or a name such as "SIGTERM", got ${signal}`, "invalid_argument");
        }
        await t.request("POST", `${base}/processes/${pid}/signal`, { json: { signal } });
      }
    });
  }

  /** Writes to the stdin of a process started by spawn; with `close` then ends it. */
  async sendStdin(pid: number, text: string, { close = false }: { close?: boolean } = {}): Promise<void> {
    checkPid(pid);
    if (typeof text !== "string") throw new InvalidOptionError("sendStdin takes text", "invalid_argument");
    await this.call((t, base) => t.request("POST", `${base}/processes/${pid}/stdin`, { json: { text, close } }));
  }
}

/** A box for untrusted Python: `run`, `runCode` (a kernel session whose variables persist),
 * `installPackages`, and everything of SimpleBox. */
export class CodeBox extends SimpleBox {
  private cells: Promise<unknown> = Promise.resolve();

  /** Runs Python `code` (`python3 -c`) and answers its stdout (also when it raised: the
   * traceback is in exec's stderr). Throws BoxTimeoutError past the timeout, OutOfMemoryError
   * when it ran out of memory. */
  async run(code: string, { timeout }: { timeout?: number | "none" | null } = {}): Promise<string> {
    if (typeof code !== "string") throw new InvalidOptionError(`run takes the code as a string, got ${typeof code}`, "invalid_argument");
    const seconds = checkCallTimeout("timeout", timeout);
    const result = await this.execArgv(["python3"], { timeout: seconds }, "python", { code });
    if (result.timedOut) {
      const limit = seconds ?? this.checked.execTimeout;
      throw new BoxTimeoutError(`the code ran past its timeout (${limit} s); give run() a larger timeout, or the box execTimeout`, "deadline_exceeded");
    }
    if (result.outOfMemory) {
      throw new OutOfMemoryError(`the code ran out of the box's memory; give the box more (memoryMib)`, "resource_exhausted");
    }
    return result.stdout;
  }

  /** Runs `code` as one cell of the box's code-interpreter session (IPython, started on first
   * use; variables persist). An exception in the cell is `execution.error`, not a throw.
   * Cells of one box run one at a time. */
  async runCode(code: string, options: RunCodeOptions = {}): Promise<Execution> {
    if (typeof code !== "string") throw new InvalidOptionError(`runCode takes the cell's code as a string, got ${typeof code}`, "invalid_argument");
    const timeout = checkCallTimeout("timeout", options.timeout);
    for (const name of ["onStdout", "onStderr", "onResult"] as const) checkCallback(name, options[name]);
    checkSignal(options.signal);
    const turn = this.cells.then(() => this.cell(code, timeout, options));
    this.cells = turn.catch(() => {});
    return turn;
  }

  private async cell(code: string, timeout: number | "none" | undefined, options: RunCodeOptions): Promise<Execution> {
    const request: Record<string, unknown> = { code };
    if (timeout !== undefined) request.timeout = timeout;
    // Counted as they come, so that a flood is cut at the box's limit here too.
    const out = new Output(this.checked.outputLimitBytes, options.onStdout);
    const err = new Output(this.checked.outputLimitBytes, options.onStderr);
    const done = await this.call((t, base) =>
      t.stream(`${base}/run_code`, request, (event, data) => {
        if (event === "stdout") out.add(textOf(data));
        else if (event === "stderr") err.add(textOf(data));
        else if (event === "result") options.onResult?.(Result.fromJson(data));
      }, { timeoutMs: this.deadline(timeout), maxEventBytes: this.maxEventBytes(), signal: options.signal }),
    );
    const execution = Execution.fromJson(done);
    if (out.truncated || err.truncated) execution.outputTruncated = true;
    return execution;
  }

  /** Ends the session's kernel: the next cell starts a fresh one (variables gone, files kept). */
  async restart(): Promise<void> {
    await this.call((t, base) => t.request("POST", `${base}/restart`, { timeoutMs: 120_000 }));
  }

  /** Interrupts the running cell (KeyboardInterrupt); nothing when none runs. */
  async interrupt(): Promise<void> {
    await this.call((t, base) => t.request("POST", `${base}/interrupt`));
  }

  /** `pip install --user` in the box, through its egress proxy: the box needs a network
   * (`allowHosts: ["pypi.org", "files.pythonhosted.org"]`). Answers pip's ExecResult. */
  async installPackages(packages: string[], { indexUrl, timeout = 300 }: { indexUrl?: string; timeout?: number } = {}): Promise<ExecResult> {
    if (!Array.isArray(packages) || packages.length === 0 || !packages.every((p) => typeof p === "string" && p !== "")) {
      throw new InvalidOptionError("installPackages takes a non-empty array of package names", "invalid_argument");
    }
    const seconds = checkCallTimeout("timeout", timeout);
    return this.call(async (t, base) =>
      execResultFromJson(await t.json("POST", `${base}/packages`, {
        json: { packages, index_url: indexUrl ?? null, timeout: seconds },
        timeoutMs: this.deadline(seconds),
        maxBytes: this.maxEventBytes(),
      })),
    );
  }

  /** installPackages with one package. */
  installPackage(name: string, options?: { indexUrl?: string; timeout?: number }): Promise<ExecResult> {
    return this.installPackages([name], options);
  }

  /** The box's network from now on: `allowHosts` (implies "allow"), or `network` "open" /
   * "none"; answers the box's new network description. Open connections to a host it no
   * longer allows are ended. Needs a box created with a network (`network: "allow"` with no
   * hosts opens nothing yet); any other box throws with code failed_precondition. */
  async setNetwork(allowHosts: string[] = [], { network = "allow" }: { network?: "none" | "allow" | "open" } = {}): Promise<string> {
    if (!Array.isArray(allowHosts) || !allowHosts.every((h) => typeof h === "string")) {
      throw new InvalidOptionError("setNetwork takes an array of host patterns", "invalid_argument");
    }
    if (!["none", "allow", "open"].includes(network)) {
      throw new InvalidOptionError(`network must be "none", "allow" or "open", got ${String(network)}`, "invalid_argument");
    }
    return this.call(async (t, base) => {
      const raw = await t.json("PUT", `${base}/network`, { json: { network, allow_hosts: allowHosts } });
      if (typeof raw.network !== "string") throw new ProtocolError("the network answer has no network", "protocol_error");
      return raw.network;
    });
  }
}

function checkPid(pid: unknown): void {
  if (!Number.isInteger(pid) || (pid as number) < 1) throw new InvalidOptionError(`pid must be a positive whole number, got ${String(pid)}`, "invalid_argument");
}

function splitArgs(cmd: string, args: unknown[], moreOptions: string[] = []): { argv: string[]; options: ExecOptions } {
  let options: ExecOptions = {};
  const rest = [...args];
  const last = rest[rest.length - 1];
  if (typeof last === "object" && last !== null && !Array.isArray(last)) {
    options = rest.pop() as ExecOptions;
    for (const name of Object.keys(options)) {
      if (!EXEC_OPTION_NAMES.includes(name) && !moreOptions.includes(name)) {
        throw new InvalidOptionError(`unknown exec option '${name}'; valid: ${[...EXEC_OPTION_NAMES, ...moreOptions].join(", ")}`, "invalid_argument");
      }
    }
  }
  const argv = [cmd, ...rest];
  if (!argv.every((a) => typeof a === "string")) throw new InvalidOptionError("a command's arguments must be strings", "invalid_argument");
  return { argv: argv as string[], options };
}

function checkSignal(signal: unknown): void {
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw new InvalidOptionError("signal must be an AbortSignal", "invalid_argument");
  }
}

function execRequest(argv: string[], options: ExecOptions): Record<string, unknown> {
  checkCallback("onStdout", options.onStdout);
  checkCallback("onStderr", options.onStderr);
  checkSignal(options.signal);
  const request: Record<string, unknown> = { argv };
  const timeout = checkCallTimeout("timeout", options.timeout);
  if (timeout !== undefined) request.timeout = timeout;
  for (const name of ["cwd", "stdin", "user"] as const) {
    const value = options[name];
    if (value === undefined) continue;
    if (typeof value !== "string") throw new InvalidOptionError(`exec option ${name} must be a string`, "invalid_argument");
    request[name] = value;
  }
  if (options.env !== undefined) {
    if (typeof options.env !== "object" || options.env === null || !Object.values(options.env).every((v) => typeof v === "string")) {
      throw new InvalidOptionError("exec option env must be an object of strings", "invalid_argument");
    }
    request.env = options.env;
  }
  return request;
}

function query(params: Record<string, string>): string {
  return new URLSearchParams(params).toString();
}
