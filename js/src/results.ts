// What calls answer: an exec's ExecResult, a cell's Execution (the shapes of the Python module,
// camelCase; the names of E2B's code-interpreter SDK). Built from the server's JSON, whose
// types are checked here: a field of the wrong type is a ProtocolError, never a wrong value.
import { ProtocolError } from "./errors.js";

type Json = Record<string, unknown>;

function field<T>(raw: Json, name: string, type: "string" | "number" | "boolean", fallback?: T): T {
  const value = raw[name];
  if (value === undefined && fallback !== undefined) return fallback;
  if (typeof value !== type) throw new ProtocolError(`the server's answer has ${name} of type ${value === null ? "null" : typeof value}, not ${type}`, "protocol_error");
  return value as T;
}

function stringList(raw: unknown, name: string): string[] {
  if (!Array.isArray(raw) || !raw.every((s) => typeof s === "string")) {
    throw new ProtocolError(`the server's answer has ${name} that is not a list of strings`, "protocol_error");
  }
  return raw;
}

// Result's accessors and the MIME types they stand for, in E2B's order.
const FORMATS: [string, string][] = [
  ["text", "text/plain"], ["html", "text/html"], ["markdown", "text/markdown"],
  ["svg", "image/svg+xml"], ["png", "image/png"], ["jpeg", "image/jpeg"],
  ["pdf", "application/pdf"], ["latex", "text/latex"], ["json", "application/json"],
  ["javascript", "application/javascript"], ["chart", "application/vnd.codebox.chart+json"],
];

/** One rich output of a cell, a MIME bundle: a display, a chart, or the value of the cell's
 * last expression (`isMainResult`). `png` and `jpeg` are base64 text. */
export class Result {
  constructor(readonly data: Readonly<Record<string, string>>, readonly isMainResult: boolean) {}

  static fromJson(raw: Json): Result {
    const data = raw.data;
    if (typeof data !== "object" || data === null || Array.isArray(data)) throw new ProtocolError("a cell result without a data object", "protocol_error");
    const bundle: Record<string, string> = {};
    for (const [mime, value] of Object.entries(data)) {
      // JSON formats may come parsed; every format is kept as text, as in Jupyter.
      bundle[mime] = typeof value === "string" ? value : JSON.stringify(value);
    }
    return new Result(bundle, raw.is_main_result === true);
  }

  /** `text/plain`: the repr IPython shows (`'2'` for `1 + 1`). */
  get text(): string | undefined { return this.data["text/plain"]; }
  get html(): string | undefined { return this.data["text/html"]; }
  get markdown(): string | undefined { return this.data["text/markdown"]; }
  get svg(): string | undefined { return this.data["image/svg+xml"]; }
  /** `image/png` as base64 text. */
  get png(): string | undefined { return this.data["image/png"]; }
  get jpeg(): string | undefined { return this.data["image/jpeg"]; }
  get pdf(): string | undefined { return this.data["application/pdf"]; }
  get latex(): string | undefined { return this.data["text/latex"]; }
  get javascript(): string | undefined { return this.data["application/javascript"]; }
  /** `application/json`, parsed; undefined when absent or not JSON. */
  get json(): unknown { return parsed(this.data["application/json"]); }
  /** A matplotlib figure as data (docs/kernel.md, "Charts"), parsed. */
  get chart(): unknown { return parsed(this.data["application/vnd.codebox.chart+json"]); }

  /** The formats it has: E2B's names for the known MIME types, the MIME type for others. */
  formats(): string[] {
    const known = new Set(FORMATS.map(([, mime]) => mime));
    return [...FORMATS.filter(([, mime]) => mime in this.data).map(([name]) => name),
            ...Object.keys(this.data).filter((mime) => !known.has(mime))];
  }
}

function parsed(text: string | undefined): unknown {
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** An exception the cell raised, or why its kernel is gone (`name: "KernelRestarted"`). */
/** A connection of the box's that was refused, failed or was cut: why, and what to do. */
export interface NetworkEvent {
  host: string;
  port: number;
  /** not_allowed, internal_address, resolve, connect, budget, secret_elsewhere, request, tls, upstream_tls */
  rule: string;
  message: string;
  hint: string;
}

/** The `network_events` of an answer: checked, at most 100. */
function networkEvents(raw: Json): NetworkEvent[] {
  const list = raw.network_events;
  if (list === undefined || list === null) return [];
  if (!Array.isArray(list)) throw new ProtocolError("network_events is not a list", "protocol_error");
  return list.slice(0, 100).map((item) => {
    if (typeof item !== "object" || item === null || Array.isArray(item)) {
      throw new ProtocolError("a network event is not an object", "protocol_error");
    }
    const e = item as Json;
    return {
      host: field(e, "host", "string", ""),
      port: field(e, "port", "number", 0),
      rule: field(e, "rule", "string", ""),
      message: field(e, "message", "string", ""),
      hint: field(e, "hint", "string", ""),
    };
  });
}

export interface ExecutionError {
  name: string;
  value: string;
  traceback: string;
}

/** What one cell did. An exception in the cell is `error`, not a thrown error. */
export class Execution {
  results: Result[] = [];
  logs: { stdout: string[]; stderr: string[] } = { stdout: [], stderr: [] };
  error: ExecutionError | null = null;
  /** The kernel's counter (`In [n]`); it starts at 1 again after a restart. */
  executionCount = 0;
  durationMs = 0;
  /** Interrupted at its timeout; the state survives unless `kernelRestarted`. */
  timedOut = false;
  /** The kernel died or was killed: every variable is gone. */
  kernelRestarted = false;
  outOfMemory = false;
  /** The cell passed the box's output limit; the rest was dropped. */
  outputTruncated = false;
  driver = "";
  /** The box's connections refused, failed or cut while the cell ran. */
  networkEvents: NetworkEvent[] = [];

  /** The main result's `text/plain` (the last expression's value). */
  get text(): string | undefined {
    return this.results.find((r) => r.isMainResult)?.text;
  }

  /** From a run_code answer. Streamed, `logs` and `results` came as events instead. */
  static fromJson(raw: Json, streamed?: { logs: Execution["logs"]; results: Result[] }): Execution {
    const e = new Execution();
    if (streamed) {
      e.logs = streamed.logs;
      e.results = streamed.results;
    } else {
      const logs = (raw.logs ?? {}) as Json;
      e.logs = { stdout: stringList(logs.stdout ?? [], "logs.stdout"), stderr: stringList(logs.stderr ?? [], "logs.stderr") };
      if (!Array.isArray(raw.results)) throw new ProtocolError("a cell's answer without results", "protocol_error");
      e.results = raw.results.map((r) => Result.fromJson(r as Json));
    }
    if (raw.error !== null && raw.error !== undefined) {
      const err = raw.error as Json;
      e.error = { name: field(err, "name", "string", ""), value: field(err, "value", "string", ""), traceback: field(err, "traceback", "string", "") };
    }
    e.executionCount = field(raw, "execution_count", "number", 0);
    e.durationMs = field(raw, "duration_ms", "number", 0);
    e.timedOut = field(raw, "timed_out", "boolean", false);
    e.kernelRestarted = field(raw, "kernel_restarted", "boolean", false);
    e.outOfMemory = field(raw, "out_of_memory", "boolean", false);
    e.outputTruncated = e.outputTruncated || field(raw, "output_truncated", "boolean", false);
    e.driver = field(raw, "driver", "string", "");
    e.networkEvents = networkEvents(raw);
    return e;
  }
}

/** What a command did. A non-zero exit is a result, not an error. */
export interface ExecResult {
  exitCode: number;
  /** The signal that killed it, 0 if none. */
  signal: number;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  outOfMemory: boolean;
  /** Past the box's output limit: the rest was dropped. */
  outputTruncated: boolean;
  durationMs: number;
  driver: string;
  /** A process's end (`attach`): bytes that had left its ring before this client saw them. */
  droppedStdout?: number;
  droppedStderr?: number;
  /** The box's connections refused, failed or cut while it ran. */
  networkEvents: NetworkEvent[];
}

/** An ExecResult from a server's answer; `stdout`/`stderr` given when they came as events. */
export function execResultFromJson(raw: Json, output?: { stdout: string; stderr: string; truncated: boolean }): ExecResult {
  const text = (name: "stdout" | "stderr") => {
    const value = field<string>(raw, name, "string", "");
    return raw[`${name}_encoding`] === "base64" ? Buffer.from(value, "base64").toString("utf8") : value;
  };
  const result: ExecResult = {
    exitCode: field(raw, "exit_code", "number"),
    signal: field(raw, "signal", "number", 0),
    stdout: (output?.stdout ?? "") + text("stdout"),
    stderr: (output?.stderr ?? "") + text("stderr"),
    timedOut: field(raw, "timed_out", "boolean", false),
    outOfMemory: field(raw, "out_of_memory", "boolean", false),
    outputTruncated: (output?.truncated ?? false) || field(raw, "output_truncated", "boolean", false),
    durationMs: field(raw, "duration_ms", "number", 0),
    driver: field(raw, "driver", "string", ""),
    networkEvents: networkEvents(raw),
  };
  if (typeof raw.dropped_stdout === "number") result.droppedStdout = raw.dropped_stdout;
  if (typeof raw.dropped_stderr === "number") result.droppedStderr = raw.dropped_stderr;
  return result;
}

/** One process of the box's table (`processes()`). */
export interface ProcessInfo {
  pid: number;
  argv: string[];
  running: boolean;
  exitCode: number | null;
  signal: number | null;
  startedUnixMs: number;
  stdoutBytes: number;
  stderrBytes: number;
}

export function processInfoFromJson(raw: Json): ProcessInfo {
  const nullableNumber = (name: string) => (raw[name] === null || raw[name] === undefined ? null : field<number>(raw, name, "number"));
  return {
    pid: field(raw, "pid", "number"),
    argv: stringList(raw.argv ?? [], "argv"),
    running: raw.state === "running",
    exitCode: nullableNumber("exit_code"),
    signal: nullableNumber("signal"),
    startedUnixMs: field(raw, "started_unix_ms", "number", 0),
    stdoutBytes: field(raw, "stdout_bytes", "number", 0),
    stderrBytes: field(raw, "stderr_bytes", "number", 0),
  };
}

/** One entry of a directory listing (`files.list`). */
export interface FileEntry {
  name: string;
  path: string;
  type: "file" | "dir" | "symlink" | "other";
  size: number;
  mode: number;
}

export function fileEntryFromJson(raw: Json): FileEntry {
  const type = field<string>(raw, "type", "string");
  return {
    name: field(raw, "name", "string"),
    path: field(raw, "path", "string"),
    type: (["file", "dir", "symlink"].includes(type) ? type : "other") as FileEntry["type"],
    size: field(raw, "size", "number", 0),
    mode: field(raw, "mode", "number", 0),
  };
}
