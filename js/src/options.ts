// Box options, checked against the schema's table (options_table.ts, generated from
// docs/options.md) before anything starts, and turned into the server's JSON names.
import { InvalidOptionError } from "./errors.js";
import { BOX_OPTION_SPECS, type BoxOptionValues, type OptionSpec } from "./options_table.js";

/** The options of a CodeBox: every box option, plus where the box runs. */
export interface BoxOptions extends BoxOptionValues {
  /** The codebox server: `"unix:/path.sock"` or `"http://host:port"`. Default:
   * `$CODEBOX_SERVER`, else a private `codebox serve` of this process. */
  server?: string;
  /** Its bearer token. Default: `$CODEBOX_TOKEN`. */
  token?: string;
  /** Milliseconds a box's creation may take (its image pulled, started). Default 300000. */
  startTimeoutMs?: number;
}

/** What a CodeBox made of its options: the server's JSON body and the values the client
 * itself needs. */
export interface CheckedOptions {
  body: Record<string, unknown>;
  server: string;
  token: string;
  startTimeoutMs: number;
  /** Seconds, null for none: the box's default exec timeout. */
  execTimeout: number | null;
  /** Bytes of stdout and of stderr a call keeps (the box's output limit). */
  outputLimitBytes: number;
}

// Names a client gives that are not box options sent to the server.
const CLIENT_OPTIONS = new Set(["server", "token", "serverToken", "startTimeoutMs"]);
const SERVER_ONLY = new Set(["home"]);

interface Named { spec: OptionSpec; wire: string; unit: string }

// camelCase name (and alias) -> its spec, the name the server takes, the value's unit.
const BY_NAME = new Map<string, Named>();
for (const spec of BOX_OPTION_SPECS) {
  if (SERVER_ONLY.has(spec.name) || spec.name === "server" || spec.name === "server_token") continue;
  BY_NAME.set(spec.camel, { spec, wire: spec.name, unit: spec.unit });
  for (const a of spec.aliases) BY_NAME.set(a.camel, { spec, wire: a.name, unit: a.unit });
}

function editDistance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let diagonal = row[0];
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const above = row[j];
      row[j] = Math.min(row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] === b[j - 1] ? 0 : 1));
      diagonal = above;
    }
  }
  return row[b.length];
}

/** The valid name nearest to `name` (case and `_` ignored, so `memory_mib` finds
 * `memoryMib`), for "did you mean" hints. */
export function nearestName(name: string, valid: Iterable<string>): string {
  const fold = (s: string) => s.toLowerCase().replace(/_/g, "");
  let best = "";
  let bestDistance = Infinity;
  for (const candidate of valid) {
    const d = editDistance(fold(name), fold(candidate));
    if (d < bestDistance) [best, bestDistance] = [candidate, d];
  }
  return best;
}

function describe(value: unknown): string {
  const text = typeof value === "string" ? JSON.stringify(value) : String(value);
  return text.length > 64 ? text.slice(0, 61) + "..." : text;
}

function bad(name: string, message: string): InvalidOptionError {
  return new InvalidOptionError(`option ${name}: ${message}`, "invalid_argument");
}

const UNIT_SCALE: Record<string, number> = { bytes: 1, MiB: 1, GiB: 1024 };

// Checks one value against its spec; answers the value as the server takes it.
function checkValue(name: string, named: Named, value: unknown): unknown {
  const { spec } = named;
  switch (spec.type) {
    case "string":
      if (typeof value !== "string") throw bad(name, `must be a string, got ${describe(value)}`);
      return value;
    case "choice":
      if (typeof value !== "string" || !spec.choices!.includes(value)) {
        const hint = typeof value === "string" ? `; did you mean "${nearestName(value, spec.choices!)}"?` : "";
        throw bad(name, `must be one of ${spec.choices!.join(", ")}, got ${describe(value)}${hint}`);
      }
      return value;
    case "bool":
      if (typeof value !== "boolean") throw bad(name, `must be true or false, got ${describe(value)}`);
      return value;
    case "environment":
      if (typeof value !== "object" || value === null || Array.isArray(value)) {
        throw bad(name, `must be an object of strings ({NAME: "value"}), got ${describe(value)}`);
      }
      for (const [k, v] of Object.entries(value)) {
        if (typeof v !== "string") throw bad(name, `${k} must be a string, got ${describe(v)}`);
        if (k === "" || k.includes("=") || k.includes("\0")) throw bad(name, `${describe(k)} is not a variable name`);
      }
      return value;
    case "list":
      if (!Array.isArray(value) || !value.every((v) => typeof v === "string")) {
        throw bad(name, `must be an array of strings, got ${describe(value)}`);
      }
      return value;
    case "duration":
      if (value === null || value === "none" || value === Infinity) return "none";
      return checkNumber(name, named, value);
    default:
      return checkNumber(name, named, value);
  }
}

function checkNumber(name: string, { spec, unit }: Named, value: unknown): number {
  if (typeof value !== "number" || !Number.isFinite(value)) {
    throw bad(name, `must be a number${spec.none ? ', "none" or null' : ""}, got ${describe(value)}`);
  }
  if ((spec.type === "integer" || spec.type === "size") && !Number.isInteger(value)) {
    throw bad(name, `must be a whole number, got ${value}`);
  }
  // An alias in its own unit (diskSizeGb in GiB) is checked in the option's unit.
  const scale = (UNIT_SCALE[unit] ?? 1) / (UNIT_SCALE[spec.unit] ?? 1);
  const inUnit = value * scale;
  const unitText = spec.unit ? ` ${spec.unit}` : "";
  if (spec.min !== null && (spec.minExclusive ? inUnit <= spec.min : inUnit < spec.min)) {
    throw bad(name, `must be ${spec.minExclusive ? "more than" : "at least"} ${spec.min}${unitText}, got ${value}${unit !== spec.unit ? " " + unit : ""}`);
  }
  if (spec.max !== null && inUnit > spec.max) {
    throw bad(name, `must be at most ${spec.max}${unitText}, got ${value}${unit !== spec.unit ? " " + unit : ""}`);
  }
  return value;
}

function specDefault(name: string): unknown {
  return BOX_OPTION_SPECS.find((s) => s.name === name)?.default;
}

/** Checks a CodeBox's options: an unknown name or a wrong value throws InvalidOptionError
 * naming the option and the nearest valid name or value. */
export function checkBoxOptions(options: BoxOptions | undefined, env = process.env): CheckedOptions {
  if (options !== undefined && (typeof options !== "object" || options === null || Array.isArray(options))) {
    throw new InvalidOptionError(`CodeBox options must be an object, got ${describe(options)}`, "invalid_argument");
  }
  const body: Record<string, unknown> = {};
  const given = new Map<string, string>(); // option -> the name it was given by
  for (const [name, value] of Object.entries(options ?? {})) {
    if (value === undefined || CLIENT_OPTIONS.has(name)) continue;
    if (SERVER_ONLY.has(name)) {
      throw bad(name, "is the server's own option: set CODEBOX_HOME for the private server, or give `codebox serve --home` to a server of yours");
    }
    const named = BY_NAME.get(name);
    if (!named) {
      const nearest = nearestName(name, [...BY_NAME.keys(), ...CLIENT_OPTIONS]);
      throw new InvalidOptionError(`unknown option '${name}'; did you mean '${nearest}'? (docs/options.md lists them all)`, "invalid_argument");
    }
    const earlier = given.get(named.spec.name);
    if (earlier !== undefined) throw bad(name, `is given twice, also as ${earlier}`);
    given.set(named.spec.name, name);
    body[named.wire] = checkValue(name, named, value);
  }
  const o = options ?? {};
  const server = o.server ?? env.CODEBOX_SERVER ?? "";
  const token = o.token ?? o.serverToken ?? env.CODEBOX_TOKEN ?? "";
  for (const [name, value] of [["server", server], ["token", token]] as const) {
    if (typeof value !== "string") throw bad(name, `must be a string, got ${describe(value)}`);
  }
  if (server !== "" && !/^(unix:\/.+|http:\/\/[^/]+\/?)$/.test(server)) {
    throw bad("server", `must be "unix:/path" or "http://host:port" (TLS: a proxy of yours on loopback), got ${describe(server)}`);
  }
  const startTimeoutMs = o.startTimeoutMs ?? 300_000;
  if (typeof startTimeoutMs !== "number" || !(startTimeoutMs > 0)) {
    throw bad("startTimeoutMs", `must be a number of milliseconds above 0, got ${describe(startTimeoutMs)}`);
  }
  const timeoutName = given.get("exec_timeout");
  const timeout = timeoutName !== undefined ? body[BY_NAME.get(timeoutName)!.wire] : specDefault("exec_timeout");
  const limitName = given.get("output_limit_bytes");
  const outputLimit = limitName !== undefined ? body[BY_NAME.get(limitName)!.wire] : specDefault("output_limit_bytes");
  return {
    body,
    server,
    token,
    startTimeoutMs,
    execTimeout: timeout === "none" || timeout === null ? null : (timeout as number),
    outputLimitBytes: Number(outputLimit),
  };
}

/** A per-call timeout in seconds (null/undefined: the box's; `"none"` or Infinity: none). */
export function checkCallTimeout(name: string, value: unknown): number | "none" | undefined {
  if (value === undefined || value === null) return undefined;
  if (value === "none" || value === Infinity) return "none";
  if (typeof value !== "number" || !(value >= 0.001) || value > 1e9) {
    throw new InvalidOptionError(`${name} must be seconds, 0.001 to 1000000000, or "none"; got ${describe(value)}`, "invalid_argument");
  }
  return value;
}
