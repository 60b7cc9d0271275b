// Tests of the package as npm installs it: what the tarball holds, that
// the name resolves to the installed copy, and that a path install of a
// fresh checkout (no dist/, no node_modules/) builds and imports.
// test/run.mjs sets COMPACT_HOST_CLIENT_SOURCE to the package's directory.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, sep } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { Client } from "compact-host-client";

const INSTALLED = join(process.cwd(), "node_modules", "compact-host-client");
// A hang guard for a cold npm cache on a busy machine.
const INSTALL_TIMEOUT_MS = 600_000;

function files(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) {
      out.push(...files(p));
    } else {
      out.push(relative(INSTALLED, p).split(sep).join("/"));
    }
  }
  return out.sort();
}

test("the name resolves to the installed copy", () => {
  const at = fileURLToPath(import.meta.resolve("compact-host-client"));
  assert.equal(at, join(INSTALLED, "dist", "index.js"));
  assert.equal(new Client().baseUrl, "http://127.0.0.1:8377");
});

test("the package holds the built code, its types, the README and the license", () => {
  assert.deepEqual(files(INSTALLED), ["LICENSE", "README.md", "dist/index.d.ts", "dist/index.js", "package.json"]);
  const manifest = JSON.parse(readFileSync(join(INSTALLED, "package.json"), "utf8"));
  assert.equal(manifest.license, "Apache-2.0");
  assert.deepEqual(manifest.dependencies ?? {}, {}, "no runtime dependencies");
  assert.match(readFileSync(join(INSTALLED, "LICENSE"), "utf8"), /Apache License\s+Version 2\.0/);
  assert.match(readFileSync(join(INSTALLED, "dist", "index.d.ts"), "utf8"), /export declare class Client\b/);
});

test("npm install from the path of a fresh checkout builds and imports", () => {
  const source = process.env.COMPACT_HOST_CLIENT_SOURCE;
  assert.ok(source, "COMPACT_HOST_CLIENT_SOURCE is not set: run the tests with `npm test`");
  const work = mkdtempSync(join(tmpdir(), "compact-host-client-path-"));
  try {
    // The checkout as git has it: no node_modules, no dist.
    const checkout = join(work, "clients", "typescript");
    cpSync(source, checkout, { recursive: true, filter: (p) => !/[\\/](node_modules|dist)$/.test(p) });
    const project = join(work, "app");
    mkdirSync(project);
    writeFileSync(join(project, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
    const npmCLI = process.env.npm_execpath;
    const npm = npmCLI && npmCLI.endsWith(".js") ? [process.execPath, npmCLI] : ["npm"];
    const install = spawnSync(npm[0], [...npm.slice(1), "install", "--no-audit", "--no-fund", "--prefer-offline", checkout], {
      cwd: project,
      encoding: "utf8",
      timeout: INSTALL_TIMEOUT_MS,
    });
    assert.equal(install.status, 0, `npm install ${checkout}:\n${install.stdout}\n${install.stderr}`);
    writeFileSync(
      join(project, "main.js"),
      'import { Client, CompactHostError } from "compact-host-client";\n' +
        'console.log(JSON.stringify([new Client({ baseUrl: "http://127.0.0.1:9/" }).baseUrl, new CompactHostError("busy", "x").retryable]));\n',
    );
    const ran = spawnSync(process.execPath, ["main.js"], { cwd: project, encoding: "utf8", timeout: 60_000 });
    assert.equal(ran.status, 0, ran.stderr);
    assert.deepEqual(JSON.parse(ran.stdout), ["http://127.0.0.1:9", true]);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
});
