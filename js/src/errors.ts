// Every error of codebox is a CodeboxError with the server's error code (docs/server.md's
// table) in `code`; the classes below tell apart what a caller handles differently.

export class CodeboxError extends Error {
  /** The server's error code (`not_found`, `unavailable`, ...) or the client's own. */
  readonly code: string;
  /** The HTTP status the server answered, or 0 when none came. */
  readonly status: number;

  constructor(message: string, code = "unknown", status = 0, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
    this.status = status;
  }
}

/** A box option or an argument is wrong; the message names it and the nearest valid one. */
export class InvalidOptionError extends CodeboxError {}

/** A box could not start (no driver, a failed start); the message says why and what to do. */
export class BoxStartError extends CodeboxError {}

/** The box's image is not in the server's store and may not be pulled there. */
export class ImageNotFoundError extends BoxStartError {}

/** No codebox server answers: none was given and there is no `codebox` program to start
 * one, or the server stopped or went away (also in the middle of a call). */
export class ServerUnavailableError extends CodeboxError {}

/** A wall-clock limit passed: `run()`'s code, or a request, or the box's lifetime. */
export class BoxTimeoutError extends CodeboxError {}

/** The code ran out of the box's memory (`memoryMib`). */
export class OutOfMemoryError extends CodeboxError {}

/** The box's node of a codebox cluster is gone, or restarted: the box ended with it. */
export class BoxLostError extends CodeboxError {}

/** The box crashed (its supervisor or agent died); the server and other boxes go on. */
export class BoxCrashedError extends CodeboxError {}

/** The server refused the token (401), or the request (403). */
export class TokenRefusedError extends CodeboxError {}

/** The server is full: `--max-boxes` or a tenant quota (429). `retryAfter` in seconds. */
export class ServerFullError extends CodeboxError {
  retryAfter = 1;
}

/** A box or file that does not exist (destroyed, reaped, never made). */
export class NotFoundError extends CodeboxError {}

/** The box was used after `stop()`, or before it started. */
export class BoxClosedError extends CodeboxError {}

/** `runCode` in an image without IPython, a package install without a network, ... (409). */
export class FailedPreconditionError extends CodeboxError {}

/** A file or an answer is over a limit (the box's disk size, the server's body limit). */
export class LimitExceededError extends CodeboxError {}

/** The server answered something that is not the API's shape. */
export class ProtocolError extends CodeboxError {}

// The server's codes, by class (docs/server.md, "The API").
const BY_CODE: Record<string, new (m: string, c: string, s: number) => CodeboxError> = {
  invalid_argument: InvalidOptionError,
  unauthenticated: TokenRefusedError,
  forbidden: TokenRefusedError,
  permission_denied: TokenRefusedError,
  not_found: NotFoundError,
  failed_precondition: FailedPreconditionError,
  payload_too_large: LimitExceededError,
  limit_exceeded: LimitExceededError,
  resource_exhausted: ServerFullError,
  box_crashed: BoxCrashedError,
  start_failed: BoxStartError,
  protocol_error: ProtocolError,
  unavailable: ServerUnavailableError,
  bad_gateway: ServerUnavailableError,
  deadline_exceeded: BoxTimeoutError,
  box_lost: BoxLostError,
};

/** The error for a server's `{"error": {"code", "message"}}` answer. `creating`: the answer to
 * a box's creation, where a refused image means the image is missing here. */
export function errorFromServer(
  code: string,
  message: string,
  status: number,
  creating = false,
): CodeboxError {
  if (creating && code === "permission_denied" && /not in this server's store/.test(message)) {
    return new ImageNotFoundError(message, code, status);
  }
  if (creating && code === "not_found") return new ImageNotFoundError(message, code, status);
  const cls = BY_CODE[code] ?? CodeboxError;
  return new cls(message, code, status);
}
