// Interpreter: a task in, an answer out; the model's code runs in a disposable box. The loop of
// `codebox ask` against any OpenAI-compatible Chat Completions endpoint: the model gets a
// run_python tool (or, where the server refuses tools, is asked for a ```python block, with one
// repair turn); each call runs as a cell of one box's session. The API key is sent to the model
// endpoint only, never into the box (whose environment holds only what its options give).
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { CodeBox } from "./box.js";
import { CodeboxError, InvalidOptionError, ProtocolError } from "./errors.js";
import type { BoxOptions } from "./options.js";
import type { Execution } from "./results.js";

export interface InterpreterOptions {
  /** Default `$CODEBOX_MODEL`, else gpt-4o-mini. */
  model?: string;
  /** Default `$OPENAI_BASE_URL`, else the OpenAI API. */
  baseUrl?: string;
  /** Default `$OPENAI_API_KEY`; sent to baseUrl only. */
  apiKey?: string;
  /** `"tools"`, `"oneshot"` or `"auto"` (tools, then oneshot where refused). */
  mode?: "auto" | "tools" | "oneshot";
  /** Model turns allowed in tools mode (default 8). */
  maxSteps?: number;
  /** Milliseconds one model request may take (default 120000). */
  requestTimeoutMs?: number;
  systemPrompt?: string;
  /** Host files copied into the box as /data/NAME before the first step. */
  inputFiles?: string[];
  /** Where the images the cells show are saved (chart-1.png, ...); default a temp dir. */
  outputDir?: string;
  /** The box's options (image, memoryMib, ...), checked now. */
  box?: BoxOptions;
  /** Ask for the reply as a stream (default true): `onText` gets the words as they come. */
  stream?: boolean;
  /** The model's words as they stream (the answer, and what it says around its code). */
  onText?: (text: string) => unknown;
  onCode?: (step: number, code: string) => unknown;
  onResult?: (step: number, execution: Execution) => unknown;
  onNotice?: (text: string) => unknown;
}

export interface Step {
  step: number;
  code: string;
  execution: Execution;
  images: string[];
}

export interface Transcript {
  task: string;
  answer: string;
  /** `answer`, `step_limit`, `code_failed` or `no_answer`. */
  stopReason: "answer" | "step_limit" | "code_failed" | "no_answer";
  mode: "tools" | "oneshot";
  model: string;
  steps: Step[];
  messages: Record<string, unknown>[];
}

/** The model endpoint refused or failed a request. */
export class ModelError extends CodeboxError {}

const SYSTEM_TOOLS =
  "You answer questions by writing Python and running it with the run_python tool, in an " +
  "isolated box with Python 3 (no network). Each call runs in the same session: variables " +
  "persist, and the value of the last expression is shown. Files given to you are in /data. " +
  "When you have the result, answer briefly in plain text.";
const SYSTEM_ONESHOT =
  "Answer with one Python 3 program in a ```python code block that prints the answer. " +
  "It runs in an isolated box with no network; files given to you are in /data.";
const RUN_PYTHON_TOOL = {
  type: "function",
  function: {
    name: "run_python",
    description: "Run Python 3 code in the session; returns stdout, stderr, the last expression's value and any error.",
    parameters: { type: "object", properties: { code: { type: "string", description: "The program." } }, required: ["code"] },
  },
};
const OUTPUT_CAP = 8000; // characters of each output sent back to the model
const REPLY_CAP = 8 << 20; // bytes of one model reply

type Message = Record<string, unknown>;

export class Interpreter {
  /** The last ask's transcript (partial when it threw). */
  transcript: Transcript | null = null;
  private readonly options: InterpreterOptions;
  private readonly model: string;
  private readonly url: string;
  private readonly apiKey: string;

  constructor(options: InterpreterOptions = {}) {
    const env = process.env;
    this.options = options;
    this.model = options.model ?? env.CODEBOX_MODEL ?? "gpt-4o-mini";
    this.url = (options.baseUrl ?? env.OPENAI_BASE_URL ?? "https://api.openai.com/v1").replace(/\/+$/, "") + "/chat/completions";
    this.apiKey = options.apiKey ?? env.OPENAI_API_KEY ?? "";
    if (!["auto", "tools", "oneshot", undefined].includes(options.mode)) {
      throw new InvalidOptionError(`mode must be auto, tools or oneshot, got ${options.mode}`, "invalid_argument");
    }
    const steps = options.maxSteps ?? 8;
    if (!Number.isInteger(steps) || steps < 1 || steps > 100) throw new InvalidOptionError(`maxSteps must be 1..100, got ${steps}`, "invalid_argument");
    new CodeBox(options.box); // checks the box options now, starts nothing
  }

  /** Asks the model; answers its answer ("" when it gave none: see transcript.stopReason). */
  async ask(task: string): Promise<string> {
    if (typeof task !== "string" || task === "") throw new InvalidOptionError("ask takes the task as a non-empty string", "invalid_argument");
    const mode = this.options.mode ?? "auto";
    const transcript: Transcript = { task, answer: "", stopReason: "no_answer", mode: mode === "oneshot" ? "oneshot" : "tools", model: this.model, steps: [], messages: [] };
    this.transcript = transcript;
    await using box = new CodeBox(this.options.box);
    for (const file of this.options.inputFiles ?? []) await box.copyIn(file, `/data/${basename(file)}`);
    // Each `return await`: the box is disposed when ask's block ends, after the loop.
    if (mode === "oneshot") return await this.oneshot(box, transcript);
    try {
      return await this.withTools(box, transcript);
    } catch (err) {
      if (mode === "auto" && err instanceof ModelError && [400, 404, 422].includes(err.status) && transcript.steps.length === 0) {
        this.options.onNotice?.(`the model server refused tools (${err.message}); asking for a code block instead`);
        transcript.mode = "oneshot";
        return await this.oneshot(box, transcript);
      }
      throw err;
    }
  }

  private async withTools(box: CodeBox, t: Transcript): Promise<string> {
    t.messages = [{ role: "system", content: this.options.systemPrompt ?? SYSTEM_TOOLS }, { role: "user", content: t.task }];
    const maxSteps = this.options.maxSteps ?? 8;
    for (let step = 1; step <= maxSteps; step++) {
      const message = await this.complete(t.messages, true);
      const calls = Array.isArray(message.tool_calls) ? (message.tool_calls as Message[]) : [];
      const content = typeof message.content === "string" ? message.content : "";
      if (calls.length === 0) return this.finish(t, content, content ? "answer" : "no_answer");
      t.messages.push({ role: "assistant", content: message.content ?? null, tool_calls: calls });
      for (const call of calls) {
        const fn = (call.function ?? {}) as Message;
        let reply: string;
        let code: unknown;
        try {
          code = fn.name === "run_python" ? (JSON.parse(String(fn.arguments ?? "{}")) as Message).code : undefined;
        } catch {
          code = undefined;
        }
        if (fn.name !== "run_python") reply = JSON.stringify({ error: "the only tool is run_python; nothing ran" });
        else if (typeof code !== "string") reply = JSON.stringify({ error: 'arguments must be JSON {"code": "..."}; nothing ran' });
        else reply = forModel(await this.runStep(box, t, step, code));
        t.messages.push({ role: "tool", tool_call_id: typeof call.id === "string" ? call.id : "", content: reply });
      }
    }
    return this.finish(t, "", "step_limit");
  }

  private async oneshot(box: CodeBox, t: Transcript): Promise<string> {
    t.messages = [{ role: "system", content: SYSTEM_ONESHOT }, { role: "user", content: t.task }];
    let last: Execution | null = null;
    for (const step of [1, 2]) {
      const message = await this.complete(t.messages, false);
      const content = typeof message.content === "string" ? message.content : "";
      const code = /```(?:python|py)?[ \t]*\n([\s\S]*?)```/.exec(content)?.[1];
      if (code === undefined) return this.finish(t, content, content ? "answer" : "no_answer");
      last = await this.runStep(box, t, step, code);
      if (last.error === null) return this.finish(t, printed(last), "answer");
      t.messages.push({ role: "assistant", content }, { role: "user", content: `It failed:\n${last.error.traceback.slice(-OUTPUT_CAP)}\nSend the fixed program.` });
    }
    return this.finish(t, "", "code_failed");
  }

  private finish(t: Transcript, answer: string, reason: Transcript["stopReason"]): string {
    t.answer = answer;
    t.stopReason = reason;
    return answer;
  }

  private async runStep(box: CodeBox, t: Transcript, step: number, code: string): Promise<Execution> {
    this.options.onCode?.(step, code);
    const execution = await box.runCode(code);
    const images: string[] = [];
    for (const result of execution.results) {
      if (!result.png) continue;
      const dir = this.imageDir();
      const path = join(dir, `chart-${t.steps.reduce((n, s) => n + s.images.length, 0) + images.length + 1}.png`);
      writeFileSync(path, Buffer.from(result.png, "base64"));
      images.push(path);
    }
    t.steps.push({ step, code, execution, images });
    this.options.onResult?.(step, execution);
    return execution;
  }

  private imageDirPath: string | null = null;
  private imageDir(): string {
    if (!this.imageDirPath) {
      if (this.options.outputDir) mkdirSync(this.options.outputDir, { recursive: true });
      this.imageDirPath = this.options.outputDir ?? mkdtempSync(join(tmpdir(), "codebox-images-"));
      if (!this.options.outputDir) this.options.onNotice?.(`images are saved in ${this.imageDirPath}`);
    }
    return this.imageDirPath;
  }

  /** One model turn (non-streaming); answers the assistant message. */
  private async complete(messages: Message[], tools: boolean): Promise<Message> {
    const body: Message = { model: this.model, messages };
    if (tools) body.tools = [RUN_PYTHON_TOOL];
    const stream = this.options.stream ?? true;
    if (stream) body.stream = true;
    const headers: Record<string, string> = { "Content-Type": "application/json" };
    if (this.apiKey) headers.Authorization = `Bearer ${this.apiKey}`;
    let response: Response;
    try {
      response = await fetch(this.url, { method: "POST", headers, body: JSON.stringify(body), signal: AbortSignal.timeout(this.options.requestTimeoutMs ?? 120_000) });
    } catch (err) {
      throw new ModelError(`cannot reach ${this.url}: ${(err as Error).message}`, "unavailable", 0, { cause: err });
    }
    if (response.ok && String(response.headers.get("content-type")).startsWith("text/event-stream")) {
      return readStream(response, this.options.onText);
    }
    const text = await readCapped(response);
    if (!response.ok) {
      let message = text.slice(0, 500);
      try {
        message = String((JSON.parse(text) as { error: { message: unknown } }).error.message).slice(0, 500);
      } catch {
        // not the usual error shape
      }
      throw new ModelError(`the model server answered HTTP ${response.status}: ${message}`, response.status === 401 ? "unauthenticated" : "unavailable", response.status);
    }
    try {
      const message = (JSON.parse(text) as { choices: { message: Message }[] }).choices[0].message;
      if (typeof message === "object" && message !== null) return message;
    } catch {
      // below
    }
    throw new ProtocolError(`not a chat completion: ${text.slice(0, 200)}`, "protocol_error");
  }
}

/** A streamed completion put back together: content pieces in order, tool calls by index
 * (their arguments in fragments, or whole as an object). */
async function readStream(response: Response, onText?: (text: string) => unknown): Promise<Message> {
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let content = "";
  const calls: { id?: string; type: string; function: { name: string; arguments: string } }[] = [];
  let pending = "";
  const take = (data: string) => {
    let chunk: { choices?: { delta?: Message }[] };
    try {
      chunk = JSON.parse(data);
    } catch {
      throw new ProtocolError(`a streamed chunk that is not JSON: ${data.slice(0, 100)}`, "protocol_error");
    }
    const delta = chunk.choices?.[0]?.delta ?? {};
    if (typeof delta.content === "string" && delta.content !== "") {
      content += delta.content;
      onText?.(delta.content);
    }
    for (const piece of Array.isArray(delta.tool_calls) ? (delta.tool_calls as Message[]) : []) {
      const index = typeof piece.index === "number" && piece.index >= 0 && piece.index < 64 ? piece.index : calls.length;
      const call = (calls[index] ??= { type: "function", function: { name: "", arguments: "" } });
      const fn = (piece.function ?? {}) as Message;
      if (typeof piece.id === "string") call.id = piece.id;
      if (typeof fn.name === "string") call.function.name += fn.name;
      if (typeof fn.arguments === "string") call.function.arguments += fn.arguments;
      else if (fn.arguments !== undefined) call.function.arguments = JSON.stringify(fn.arguments);
    }
  };
  for await (const value of cappedChunks(reader)) {
    pending += decoder.decode(value, { stream: true });
    const lines = pending.split("\n");
    pending = lines.pop() ?? "";
    for (const line of lines.map((l) => l.replace(/\r$/, ""))) {
      if (!line.startsWith("data:")) continue;
      const data = line.slice(5).trim();
      if (data === "[DONE]") return assembled();
      take(data);
    }
  }
  return assembled();

  function assembled(): Message {
    const message: Message = { role: "assistant", content };
    const made = calls.filter(Boolean).map((c, i) => ({ ...c, id: c.id ?? `call_${i}` }));
    if (made.length) message.tool_calls = made;
    return message;
  }
}

/** The pieces of a model's reply as they come, REPLY_CAP bytes in all at most: past it the
 * read is cancelled and a ProtocolError thrown. */
async function* cappedChunks(reader: ReadableStreamDefaultReader<Uint8Array>): AsyncGenerator<Uint8Array> {
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    size += value.length;
    if (size > REPLY_CAP) {
      await reader.cancel();
      throw new ProtocolError(`the model's reply is over ${REPLY_CAP} bytes`, "protocol_error");
    }
    yield value;
  }
}

async function readCapped(response: Response): Promise<string> {
  const reader = response.body?.getReader();
  if (!reader) return "";
  const parts: Uint8Array[] = [];
  for await (const value of cappedChunks(reader)) parts.push(value);
  return Buffer.concat(parts).toString("utf8");
}

/** What the cell printed, then its last expression's value, as a notebook shows them. */
function printed(e: Execution): string {
  return e.logs.stdout.join("") + (e.text ? e.text + "\n" : "");
}

function forModel(e: Execution): string {
  const error = e.error && { name: e.error.name, value: e.error.value, traceback: e.error.traceback.slice(-OUTPUT_CAP) };
  return JSON.stringify({
    stdout: e.logs.stdout.join("").slice(-OUTPUT_CAP),
    stderr: e.logs.stderr.join("").slice(-OUTPUT_CAP),
    result: (e.text ?? "").slice(-OUTPUT_CAP),
    images: e.results.filter((r) => r.png).length,
    error,
    timed_out: e.timedOut,
    // Why a connection failed and what to do, so the model stops retrying a host it cannot reach.
    ...(e.networkEvents.length > 0 ? { network_events: e.networkEvents.slice(0, 5) } : {}),
  });
}
