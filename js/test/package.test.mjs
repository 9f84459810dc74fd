// `npm pack` gives a package that a new project installs and imports, types included.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";
import { ROOT, skipReason, tempDir } from "./helpers.mjs";

const run = promisify(execFile);
const JS = join(ROOT, "js");

test("npm pack installs into a new project, which imports it and type-checks against it", async () => {
  const dir = tempDir("codebox-js-pack-");
  const { stdout } = await run("npm", ["pack", "--pack-destination", dir, "--json"], { cwd: JS, timeout: 120_000 });
  const [packed] = JSON.parse(stdout);
  const files = packed.files.map((f) => f.path);
  assert.ok(files.includes("dist/index.js") && files.includes("dist/index.d.ts"), files.join(" "));
  assert.ok(!files.some((f) => f.startsWith("src/") || f.startsWith("test/")), "only the built package ships");
  const project = join(dir, "project");
  await run("mkdir", ["-p", project]);
  writeFileSync(join(project, "package.json"), JSON.stringify({ name: "fresh", version: "1.0.0", type: "module" }));
  // No registry is needed: the package has no dependencies.
  await run("npm", ["install", "--offline", "--no-audit", "--no-fund", join(dir, packed.filename)], { cwd: project, timeout: 120_000 });
  const { stdout: imported } = await run(process.execPath, ["-e", `import("codebox").then((m) => console.log(typeof m.CodeBox, typeof m.Interpreter, new m.CodeBox({ memoryMib: 256 }) instanceof m.SimpleBox))`], { cwd: project });
  assert.equal(imported.trim(), "function function true");
  writeFileSync(join(project, "main.ts"), `
    import { CodeBox, CodeboxError, type ExecResult } from "codebox";
    async function main(): Promise<void> {
      const box = new CodeBox({ image: "python", memoryMib: 256, workingDir: "/work" });
      const out: string = await box.run("print(1)");
      const r: ExecResult = await box.exec("ls", "-l", { cwd: "/" });
      const e = await box.runCode("1 + 1");
      console.log(out, r.exitCode, e.text, e.results[0]?.png, e.error?.traceback);
      await box.stop();
    }
    main().catch((err: unknown) => { if (err instanceof CodeboxError) console.log(err.code); });
  `);
  writeFileSync(join(project, "bad.ts"), `import { CodeBox } from "codebox";\nnew CodeBox({ memoryMib: "lots" });\n`);
  const tsc = join(JS, "node_modules", "typescript", "bin", "tsc");
  const flags = ["--noEmit", "--strict", "--module", "nodenext", "--moduleResolution", "nodenext", "--target", "es2022", "--types", "node", "--typeRoots", join(JS, "node_modules", "@types")];
  await run(process.execPath, [tsc, ...flags, "main.ts"], { cwd: project });
  await assert.rejects(run(process.execPath, [tsc, ...flags, "bad.ts"], { cwd: project }), (err) => {
    assert.match(err.stdout, /bad\.ts\(2,\d+\): error TS2322: Type 'string' is not assignable to type 'number'/, "the types know the options");
    return true;
  });

  // `await using`, compiled by TypeScript (Node 20 does not parse it yet): the box is stopped
  // at the block's end.
  if (skipReason()) return;
  writeFileSync(join(project, "using.ts"), `
    import { BoxClosedError, CodeBox } from "codebox";
    let kept: CodeBox;
    {
      await using box = new CodeBox();
      process.stdout.write(await box.run("print('inside')"));
      kept = box;
    }
    try {
      await kept.run("print(1)");
    } catch (err) {
      console.log(err instanceof BoxClosedError ? "stopped" : String(err));
    }
  `);
  await run(process.execPath, [tsc, ...flags.filter((f) => f !== "--noEmit"), "--lib", "es2022,esnext.disposable", "using.ts"], { cwd: project });
  const { stdout: used } = await run(process.execPath, ["using.js"], { cwd: project, timeout: 60_000 });
  assert.equal(used, "inside\nstopped\n");

  // The README's example, as a user pastes it.
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  const example = /## From Node\.js and TypeScript[\s\S]*?```js\n([\s\S]*?)```/.exec(readme)?.[1];
  assert.ok(example, "README.md has the Node example");
  writeFileSync(join(project, "readme.mjs"), example);
  const { stdout: printed } = await run(process.execPath, ["readme.mjs"], { cwd: project, timeout: 60_000 });
  assert.equal(printed, "42\n\n6.283185307179586\n");
});
