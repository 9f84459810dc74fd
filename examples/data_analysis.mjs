#!/usr/bin/env node
// Data analysis in a box, in JavaScript: a CSV in, a question, an answer and charts out.
//
//     npm install /path/to/codebox/js
//     OPENAI_API_KEY=sk-... node examples/data_analysis.mjs [data.csv] [question] [out-dir]
//
// Without a CSV it uses examples/data/sales.csv (a made-up shop's monthly revenue). codebox's
// Interpreter copies the CSV into the box as /data/<name>; each step the model runs is a cell
// of the same Python session (a DataFrame loaded in step 1 is there in step 2), and every chart
// a cell shows comes back as a PNG saved in out-dir (chart-1.png, ...; default a temporary
// directory). The box runs the python-data image (numpy, pandas, matplotlib:
// `codebox image build python-data`). The API key stays in this process.
import { existsSync, readFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { CodeboxError, Interpreter } from "codebox";

const here = dirname(fileURLToPath(import.meta.url));
const [csv = join(here, "data", "sales.csv"),
       question = "Which month had the highest revenue? Plot revenue by month.",
       outputDir] = process.argv.slice(2);
if (!existsSync(csv)) {
  console.error(`data_analysis: no CSV file at ${csv}; give one as the first argument`);
  process.exit(2);
}
const head = readFileSync(csv, "utf8").split("\n").slice(0, 3).join("\n");
const task = `${question}\n\nThe table is /data/${basename(csv)}; it begins:\n${head}`;

const interp = new Interpreter({
  inputFiles: [csv],
  outputDir,
  box: { image: process.env.CODEBOX_IMAGE || "python-data", memoryMib: 1024, execTimeout: 120 },
  onCode: (step, code) => console.error(`--- step ${step}: running\n${code.trimEnd()}`),
  onResult: (step, e) => console.error(`--- step ${step}: ${e.error ? `raised ${e.error.name}` : "ok"} in ${e.durationMs} ms`),
  onNotice: (text) => console.error(`--- ${text}`),
});
try {
  console.log((await interp.ask(task)).trimEnd());
} catch (err) {
  if (!(err instanceof CodeboxError)) throw err;
  console.error(`data_analysis: ${err.message}`); // the model server or the box failed: says why
  process.exit(1);
}
for (const step of interp.transcript.steps) for (const chart of step.images) console.error(`--- chart: ${chart}`);
process.exit(interp.transcript.stopReason === "answer" ? 0 : 1);
