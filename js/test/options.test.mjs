// Box options are checked before anything starts, against the schema's table.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { test } from "node:test";
import { CodeBox, InvalidOptionError, SimpleBox, checkBoxOptions } from "../dist/index.js";
import { BOX_OPTION_SPECS } from "../dist/options_table.js";
import { CODEBOX } from "./helpers.mjs";

function refused(options, pattern) {
  assert.throws(() => new CodeBox(options), (err) => {
    assert.ok(err instanceof InvalidOptionError, `${err.name}: ${err.message}`);
    assert.match(err.message, pattern);
    return true;
  });
}

test("an unknown option names the nearest valid one", () => {
  refused({ memroyMib: 256 }, /unknown option 'memroyMib'; did you mean 'memoryMib'\?/);
  refused({ memory_mib: 256 }, /did you mean 'memoryMib'\?/);
  refused({ workingdir: "/x" }, /did you mean 'workingDir'\?/);
  refused({ diskSizeGB: 1 }, /did you mean 'diskSizeGb'\?/);
  assert.throws(() => new SimpleBox({ imgae: "python" }), /did you mean 'image'\?/);
});

test("a wrong value names the option and what it takes", () => {
  refused({ memoryMib: 5 }, /option memoryMib: must be at least 32 MiB, got 5/);
  refused({ memoryMib: "512" }, /option memoryMib: must be a number/);
  refused({ cpus: 0 }, /option cpus: must be more than 0/);
  refused({ maxProcesses: 1.5 }, /whole number/);
  refused({ driver: "jial" }, /option driver: must be one of auto, jail, vm, got "jial"; did you mean "jail"\?/);
  refused({ diskSizeGb: 2048 }, /option diskSizeGb: must be at most 1048576 MiB, got 2048 GiB/);
  refused({ env: { A: 1 } }, /option env: A must be a string/);
  refused({ allowHosts: "pypi.org" }, /array of strings/);
  refused({ execTimeout: 0 }, /at least 0.001/);
  refused({ memory: 256, memoryMib: 256 }, /given twice/);
  refused({ server: "localhost:80" }, /option server: must be "unix:\/path" or "http:\/\/host:port"/);
  refused({ server: "https://example.org" }, /option server: must be/);
  refused({ home: "/x" }, /server's own option/);
});

test("valid options become the server's names, aliases in their own unit", () => {
  const checked = checkBoxOptions({ image: "python", memoryMib: 256, diskSizeGb: 2, workingDir: "/w", execTimeout: null, env: { A: "1" }, allowEmulation: true }, {});
  assert.deepEqual(checked.body, { image: "python", memory_mib: 256, disk_size_gb: 2, working_dir: "/w", exec_timeout: "none", env: { A: "1" }, allow_emulation: true });
  assert.equal(checked.execTimeout, null);
  assert.equal(checked.server, "");
  const fromEnv = checkBoxOptions({ outputLimitBytes: 4096 }, { CODEBOX_SERVER: "unix:/s.sock", CODEBOX_TOKEN: "t" });
  assert.equal(fromEnv.server, "unix:/s.sock");
  assert.equal(fromEnv.token, "t");
  assert.equal(fromEnv.outputLimitBytes, 4096);
  assert.equal(fromEnv.execTimeout, 30, "the schema's default");
});

test("the option table is the codebox program's schema", { skip: CODEBOX ? false : "no codebox program" }, () => {
  const markdown = execFileSync(CODEBOX, ["options", "--markdown"], { encoding: "utf8" });
  const box = markdown.slice(markdown.indexOf("## Box options"), markdown.indexOf("## Exec options"));
  const names = [...box.matchAll(/^\| `([a-z_]+)` \|/gm)].map((m) => m[1]);
  assert.ok(names.length > 20, `${names.length} options in codebox options --markdown`);
  assert.deepEqual(BOX_OPTION_SPECS.map((s) => s.name), names);
});
