#!/usr/bin/env node
// The classic code interpreter in JavaScript: ask a model for code, run it in a box, give the
// result back, until the model answers.
//
//     npm install openai /path/to/codebox/js
//     OPENAI_API_KEY=sk-... node examples/interpreter.mjs "What is the 30th Fibonacci number?"
//
// The model client is the official `openai` package (any OpenAI-compatible server: set
// OPENAI_BASE_URL; CODEBOX_MODEL picks the model, default gpt-4o-mini). The model gets one
// tool, run_python; each call runs as a cell of one IPython session in the same disposable
// box, so variables persist between steps. The API key stays in this process: the box's
// environment holds only PATH, HOME and LANG.
import OpenAI from "openai";
import { CodeBox } from "codebox";

const SYSTEM =
  "You answer questions by writing Python and running it with the run_python tool, in an " +
  "isolated box with Python 3 and its standard library (no network). Each call runs in the " +
  "same session: variables persist, and the value of the last expression is shown. When you " +
  "have the result, answer briefly in plain text.";
const RUN_PYTHON = {
  type: "function",
  function: {
    name: "run_python",
    description: "Run Python 3 code in the session; returns stdout, stderr, the last expression's value and any error.",
    parameters: { type: "object", properties: { code: { type: "string" } }, required: ["code"] },
  },
};
const OUTPUT_CAP = 8000; // characters of each output sent back to the model

// What a cell did, as the model reads it.
function forModel(execution) {
  return JSON.stringify({
    stdout: execution.logs.stdout.join("").slice(-OUTPUT_CAP),
    stderr: execution.logs.stderr.join("").slice(-OUTPUT_CAP),
    result: (execution.text ?? "").slice(-OUTPUT_CAP),
    error: execution.error && { name: execution.error.name, value: execution.error.value },
    timed_out: execution.timedOut,
  });
}

async function ask(client, box, task, maxSteps = 8) {
  const model = process.env.CODEBOX_MODEL || "gpt-4o-mini";
  const messages = [{ role: "system", content: SYSTEM }, { role: "user", content: task }];
  for (let step = 1; step <= maxSteps; step++) {
    const reply = await client.chat.completions.create({ model, messages, tools: [RUN_PYTHON] });
    const message = reply.choices[0].message;
    if (!message.tool_calls?.length) return message.content ?? "";
    messages.push(message);
    for (const call of message.tool_calls) {
      let content;
      try {
        const { code } = JSON.parse(call.function.arguments);
        console.error(`--- step ${step}: running\n${code}`);
        const execution = await box.runCode(code, { timeout: 60 });
        content = forModel(execution);
        console.error(`--- ${execution.error ? `raised ${execution.error.name}` : "ok"}\n${execution.logs.stdout.join("")}`);
      } catch (err) {
        if (err instanceof SyntaxError) content = JSON.stringify({ error: 'arguments must be JSON {"code": "..."}' });
        else throw err;
      }
      messages.push({ role: "tool", tool_call_id: call.id, content });
    }
  }
  return `(no answer after ${maxSteps} steps)`;
}

const task = process.argv.slice(2).join(" ") || "What is the 30th Fibonacci number?";
const client = new OpenAI({ apiKey: process.env.OPENAI_API_KEY || "none", maxRetries: 1 });
const box = new CodeBox({ memoryMib: 512 });
try {
  console.log(await ask(client, box, task));
} finally {
  await box.stop();
}
