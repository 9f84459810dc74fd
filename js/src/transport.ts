// HTTP/1.1 to a codebox server over a unix socket or TCP, with node:http only. Everything the
// server sends is treated as hostile input: answers are read up to a byte cap, streamed events
// one at a time up to a cap each, and every request has a deadline unless its caller asked
// for none.
import * as http from "node:http";
import {
  BoxTimeoutError,
  CodeboxError,
  LimitExceededError,
  ProtocolError,
  ServerUnavailableError,
  errorFromServer,
} from "./errors.js";

export interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

export interface RequestOptions {
  json?: unknown;
  body?: Buffer | Uint8Array;
  contentType?: string;
  /** The most bytes of the answer's body to take; more is an error. */
  maxBytes?: number;
  /** Milliseconds until the request is abandoned; null: no deadline. */
  timeoutMs?: number | null;
  /** The answer to a box's creation (a refused image is then ImageNotFoundError). */
  creating?: boolean;
}

export interface StreamOptions {
  timeoutMs?: number | null;
  /** Aborts the call: the connection closes, and the server stops the work (interrupts the
   * cell, kills the exec's processes). The call rejects with the signal's reason. */
  signal?: AbortSignal;
  /** The most bytes one event may hold. */
  maxEventBytes: number;
}

const DEFAULT_TIMEOUT_MS = 60_000;
const ERROR_BODY_CAP = 64 * 1024;

export class Transport {
  readonly address: string;
  private readonly token: string;
  private readonly socketPath: string | undefined;
  private readonly host: string;
  private readonly port: number;
  private readonly agent: http.Agent;

  constructor(address: string, token: string) {
    this.address = address;
    this.token = token;
    if (address.startsWith("unix:")) {
      this.socketPath = address.slice("unix:".length);
      this.host = "localhost";
      this.port = 80;
    } else {
      const url = new URL(address); // checked by checkBoxOptions: http://host:port
      this.host = url.hostname.replace(/^\[|\]$/g, "");
      this.port = Number(url.port || 80);
    }
    // Kept-alive connections spare a connect per call; idle ones do not hold the process open,
    // and are closed after 15 s, before the server's 30 s would close one under a new request.
    this.agent = new http.Agent({ keepAlive: true, maxSockets: 64, timeout: 15_000 });
  }

  close(): void {
    this.agent.destroy();
  }

  // A request; past `timeoutMs` it is abandoned through `fail` (the caller's one way to settle).
  private open(method: string, path: string, headers: Record<string, string>, timeoutMs: number | null, fail: (err: unknown) => void): http.ClientRequest {
    const all: Record<string, string> = { ...headers };
    if (this.token) all.Authorization = `Bearer ${this.token}`;
    const req = http.request({
      method,
      path,
      headers: all,
      agent: this.agent,
      socketPath: this.socketPath,
      host: this.socketPath ? undefined : this.host,
      port: this.socketPath ? undefined : this.port,
    });
    if (timeoutMs !== null) {
      const timer = setTimeout(() => {
        fail(new BoxTimeoutError(`${method} ${path.split("?")[0]}: no answer from ${this.address} within ${timeoutMs / 1000} s`, "deadline_exceeded"));
      }, timeoutMs);
      req.once("close", () => clearTimeout(timer));
    }
    return req;
  }

  private connectionError(err: unknown, method: string, path: string): CodeboxError {
    if (err instanceof CodeboxError) return err;
    const e = err as NodeJS.ErrnoException;
    const what = `${method} ${path.split("?")[0]}`;
    if (e.code === "ECONNREFUSED" || e.code === "ENOENT") {
      return new ServerUnavailableError(`no codebox server answers at ${this.address} (${e.code}); start one (codebox serve) or give another`, "unavailable", 0, { cause: err });
    }
    return new ServerUnavailableError(`${what}: the connection to ${this.address} broke (${e.code ?? e.message}): the server stopped or went away`, "unavailable", 0, { cause: err });
  }

  /** One request; answers the whole body (at most maxBytes). An error status throws the
   * CodeboxError of the server's error code. */
  request(method: string, path: string, options: RequestOptions = {}, retried = false): Promise<Answer> {
    const maxBytes = options.maxBytes ?? 16 << 20;
    const headers: Record<string, string> = {};
    let payload: Buffer | Uint8Array | undefined = options.body;
    if (options.json !== undefined) {
      payload = Buffer.from(JSON.stringify(options.json));
      headers["Content-Type"] = "application/json";
    } else if (options.contentType) {
      headers["Content-Type"] = options.contentType;
    }
    if (payload) headers["Content-Length"] = String(payload.byteLength);
    else if (method !== "GET" && method !== "DELETE") headers["Content-Length"] = "0";
    const timeoutMs = options.timeoutMs === undefined ? DEFAULT_TIMEOUT_MS : options.timeoutMs;
    return new Promise<Answer>((resolve, reject) => {
      let settled = false;
      const fail = (err: unknown) => {
        if (settled) return;
        settled = true;
        reject(err);
        req.destroy();
      };
      const req = this.open(method, path, headers, timeoutMs, fail);
      req.on("error", (err) => {
        if (!settled && !retried && staleConnection(req, answered, err)) {
          settled = true;
          this.request(method, path, options, true).then(resolve, reject);
          return;
        }
        fail(this.connectionError(err, method, path));
      });
      let answered = false;
      req.on("response", (res) => {
        answered = true;
        const failed = (res.statusCode ?? 0) >= 400;
        const cap = failed ? ERROR_BODY_CAP : maxBytes;
        const parts: Buffer[] = [];
        let size = 0;
        res.on("data", (chunk: Buffer) => {
          size += chunk.length;
          if (size > cap) {
            // An error's message is cut and the rest drained; an answer over its cap ends here.
            if (!failed) fail(new LimitExceededError(`${method} ${path.split("?")[0]}: the answer is over ${cap} bytes`, "limit_exceeded"));
            return;
          }
          parts.push(chunk);
        });
        res.on("error", (err) => fail(this.connectionError(err, method, path)));
        res.on("close", () => {
          if (!res.complete) fail(new ServerUnavailableError(`${method} ${path.split("?")[0]}: the answer from ${this.address} broke off: the server stopped or went away`, "unavailable"));
        });
        res.on("end", () => {
          if (settled) return;
          settled = true;
          const answer = { status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(parts) };
          if (failed) reject(errorOf(answer, options.creating));
          else resolve(answer);
        });
      });
      req.end(payload);
    });
  }

  /** A request whose answer is one JSON object. */
  async json(method: string, path: string, options: RequestOptions = {}): Promise<Record<string, unknown>> {
    const answer = await this.request(method, path, options);
    return parseObject(answer.body, `${method} ${path}`);
  }

  /** A request answered with server-sent events: `onEvent` gets each (name, parsed data) in
   * order; answers the data of the last, `done`. An `error` event throws its error. */
  stream(
    path: string,
    json: unknown,
    onEvent: (event: string, data: Record<string, unknown>) => void,
    options: StreamOptions,
    method = "POST",
    retried = false,
  ): Promise<Record<string, unknown>> {
    const payload = json === undefined ? undefined : Buffer.from(JSON.stringify(json));
    const headers: Record<string, string> = { Accept: "text/event-stream" };
    if (payload) {
      headers["Content-Type"] = "application/json";
      headers["Content-Length"] = String(payload.length);
    }
    const timeoutMs = options.timeoutMs === undefined ? DEFAULT_TIMEOUT_MS : options.timeoutMs;
    return new Promise((resolve, reject) => {
      let settled = false;
      const fail = (err: unknown) => {
        if (settled) return;
        settled = true;
        reject(err);
        req.destroy();
      };
      const req = this.open(method, path, headers, timeoutMs, fail);
      const signal = options.signal;
      if (signal) {
        const abort = () => fail(signal.reason);
        if (signal.aborted) return abort();
        signal.addEventListener("abort", abort, { once: true });
        req.once("close", () => signal.removeEventListener("abort", abort));
      }
      req.on("error", (err) => {
        if (!settled && !retried && staleConnection(req, answered, err)) {
          settled = true;
          this.stream(path, json, onEvent, options, method, true).then(resolve, reject);
          return;
        }
        fail(this.connectionError(err, method, path));
      });
      let answered = false;
      req.on("response", (res) => {
        answered = true;
        if ((res.statusCode ?? 0) >= 400 || !String(res.headers["content-type"] ?? "").startsWith("text/event-stream")) {
          // A plain answer: an error (or a server that does not stream this route).
          const parts: Buffer[] = [];
          let size = 0;
          res.on("data", (c: Buffer) => { if ((size += c.length) <= ERROR_BODY_CAP) parts.push(c); });
          res.on("end", () => {
            const answer = { status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(parts) };
            if (answer.status >= 400) return fail(errorOf(answer));
            try {
              settled = true;
              resolve(parseObject(answer.body, path));
            } catch (err) {
              reject(err);
            }
          });
          return;
        }
        const parser = new EventParser(options.maxEventBytes, (event, text) => {
          if (settled) return;
          const data = parseObject(text, `${path} event ${event}`);
          if (event === "done") {
            settled = true;
            resolve(data);
            req.destroy(); // the stream's end; the connection is not reused
          } else if (event === "error") {
            const e = (data.error ?? {}) as Record<string, unknown>;
            fail(errorFromServer(String(e.code ?? "unknown"), String(e.message ?? "the call failed"), 200));
          } else {
            onEvent(event, data);
          }
        });
        res.on("data", (chunk: Buffer) => {
          try {
            parser.push(chunk);
          } catch (err) {
            fail(err); // a callback raised, or the server sent what no event may be
          }
        });
        res.on("error", (err) => fail(this.connectionError(err, method, path)));
        res.on("close", () => fail(new ServerUnavailableError(`${path.split("?")[0]}: the event stream from ${this.address} ended before its end: the server stopped or went away`, "unavailable")));
      });
      req.end(payload);
    });
  }
}

/** A kept-alive connection the server had closed before this request reached it (it closes
 * idle ones): the request failed before any answer, and is sent once more on a new one. */
function staleConnection(req: http.ClientRequest, answered: boolean, err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException).code;
  return req.reusedSocket && !answered && (code === "ECONNRESET" || code === "EPIPE");
}

/** Server-sent events from byte chunks, each event at most `maxBytes`. */
class EventParser {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private event = "message";
  private data: string[] = [];
  private dataBytes = 0;

  constructor(private readonly maxBytes: number, private readonly dispatch: (event: string, data: string) => void) {}

  push(chunk: Buffer): void {
    let start = 0;
    for (let nl = chunk.indexOf(10, start); nl >= 0; nl = chunk.indexOf(10, start)) {
      const piece = chunk.subarray(start, nl);
      const line = this.pending.length ? Buffer.concat([...this.pending, piece]) : piece;
      this.pending = [];
      this.pendingBytes = 0;
      this.line(line.toString("utf8").replace(/\r$/, ""));
      start = nl + 1;
    }
    if (start < chunk.length) {
      this.pendingBytes += chunk.length - start;
      if (this.pendingBytes + this.dataBytes > this.maxBytes) throw this.tooLarge();
      this.pending.push(chunk.subarray(start));
    }
  }

  private tooLarge(): Error {
    return new ProtocolError(`the server sent an event over ${this.maxBytes} bytes`, "protocol_error");
  }

  private line(line: string): void {
    if (line === "") {
      if (this.data.length) this.dispatch(this.event, this.data.join("\n"));
      this.event = "message";
      this.data = [];
      this.dataBytes = 0;
      return;
    }
    if (line.startsWith(":")) return;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "event") this.event = value.slice(0, 64);
    else if (field === "data") {
      this.dataBytes += value.length + 1;
      if (this.dataBytes > this.maxBytes) throw this.tooLarge();
      this.data.push(value);
    }
  }
}

function parseObject(body: Buffer | string, what: string): Record<string, unknown> {
  const text = typeof body === "string" ? body : body.toString("utf8");
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new ProtocolError(`${what}: the server's answer is not JSON: ${JSON.stringify(text.slice(0, 64))}`, "protocol_error");
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new ProtocolError(`${what}: the server's answer is not a JSON object`, "protocol_error");
  }
  return value as Record<string, unknown>;
}

function errorOf(answer: Answer, creating = false): CodeboxError {
  let code = "unknown";
  let message = `the server answered HTTP ${answer.status}`;
  try {
    const e = (JSON.parse(answer.body.toString("utf8")) as { error?: { code?: unknown; message?: unknown } }).error;
    if (typeof e?.code === "string") code = e.code.slice(0, 64);
    if (typeof e?.message === "string") message = e.message.slice(0, 4096);
  } catch {
    // not the API's error shape: the status says it
  }
  if (code === "unknown") {
    code = ({ 401: "unauthenticated", 404: "not_found", 413: "payload_too_large", 429: "resource_exhausted", 503: "unavailable", 504: "deadline_exceeded" } as Record<number, string>)[answer.status] ?? code;
  }
  const error = errorFromServer(code, message, answer.status, creating);
  const retry = Number(answer.headers["retry-after"]);
  if ("retryAfter" in error && Number.isFinite(retry) && retry >= 0) (error as { retryAfter: number }).retryAfter = Math.min(retry, 3600);
  return error;
}
