// codebox for Node.js: disposable isolated boxes for untrusted, model-written code, on a
// codebox server (a given one, or a private `codebox serve` this process starts). docs/node.md.
export { CodeBox, SimpleBox } from "./box.js";
export type { BoxInfo, EgressRecord, ExecOptions, RunCodeOptions, TextCallback } from "./box.js";
export * from "./errors.js";
export { Interpreter, ModelError } from "./interpreter.js";
export type { InterpreterOptions, Step, Transcript } from "./interpreter.js";
export { checkBoxOptions } from "./options.js";
export type { BoxOptions } from "./options.js";
export type { BoxOptionValues } from "./options_table.js";
export { Execution, Result } from "./results.js";
export type { ExecResult, ExecutionError, FileEntry, NetworkEvent, ProcessInfo } from "./results.js";
export { findCodebox, privateServerInfo } from "./server.js";
export type { PrivateServer } from "./server.js";
