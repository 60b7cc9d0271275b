// `npm test`: installs the package as a user does and runs the tests
// against the installed copy, never against src/.
//
//  1. npm pack: the prepare script builds dist/, and the tarball holds
//     what a user gets;
//  2. a new project in a temporary directory installs the tarball;
//  3. the tests (test/*.test.ts) are compiled there, importing
//     "compact-host-client" by name, so the shipped .d.ts files are what
//     they type-check against;
//  4. node --test runs them against a live `compact-host serve` and
//     `proxy`: $COMPACT_HOST_BIN, or a binary built here with go build.
//
// Nothing reaches the network but npm's registry for a cold cache; the
// tarball has no dependencies. KEEP_TEST_DIR=1 keeps the directory.

import { spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const pkg = dirname(dirname(fileURLToPath(import.meta.url)));
const repo = resolve(pkg, "..", "..");
// Hang guards for a shared, busy machine, not speed requirements.
const NPM_TIMEOUT_MS = 600_000;
const BUILD_TIMEOUT_MS = 900_000;
const TEST_TIMEOUT_MS = 1_200_000;

const npmCLI = process.env.npm_execpath;
const npm = npmCLI && npmCLI.endsWith(".js") ? [process.execPath, npmCLI] : ["npm"];

const work = mkdtempSync(join(tmpdir(), "compact-host-client-test-"));
let status = 1;
try {
  status = main();
} catch (err) {
  console.error(`npm test: ${err.message}`);
} finally {
  if (process.env.KEEP_TEST_DIR) {
    console.error(`test: kept ${work}`);
  } else {
    rmSync(work, { recursive: true, force: true });
  }
}
process.exit(status);

function run(what, argv, opts) {
  const r = spawnSync(argv[0], argv.slice(1), { stdio: ["ignore", "inherit", "inherit"], ...opts });
  if (r.error || r.status !== 0) {
    throw new Error(`${what}: ${r.error ? r.error.message : r.signal ?? `exit ${r.status}`}`);
  }
}

function main() {
  const packs = join(work, "pack");
  mkdirSync(packs);
  run("npm pack", [...npm, "pack", "--pack-destination", packs, "--silent"], { cwd: pkg, stdio: ["ignore", "ignore", "inherit"], timeout: NPM_TIMEOUT_MS });
  const tarballs = readdirSync(packs).filter((f) => f.endsWith(".tgz"));
  if (tarballs.length !== 1) {
    throw new Error(`npm pack left ${tarballs.length} tarballs in ${packs}`);
  }
  const tarball = join(packs, tarballs[0]);

  const project = join(work, "project");
  mkdirSync(join(project, "test"), { recursive: true });
  writeFileSync(join(project, "package.json"), JSON.stringify({ name: "uses-compact-host-client", private: true, type: "module" }, null, 2));
  run("npm install (the packed tarball)", [...npm, "install", "--no-audit", "--no-fund", "--prefer-offline", tarball], { cwd: project, timeout: NPM_TIMEOUT_MS });

  for (const f of readdirSync(join(pkg, "test")).filter((f) => f.endsWith(".ts"))) {
    copyFileSync(join(pkg, "test", f), join(project, "test", f));
  }
  // The compiler and Node's types are this package's devDependencies.
  writeFileSync(
    join(project, "tsconfig.json"),
    JSON.stringify(
      {
        compilerOptions: {
          target: "ES2022",
          module: "NodeNext",
          moduleResolution: "NodeNext",
          lib: ["ES2022", "DOM"],
          types: ["node"],
          typeRoots: [join(pkg, "node_modules", "@types")],
          strict: true,
          noUnusedLocals: true,
          rootDir: "test",
          outDir: "dist-test",
        },
        include: ["test/**/*.ts"],
      },
      null,
      2,
    ),
  );
  run("tsc (the tests)", [process.execPath, join(pkg, "node_modules", "typescript", "bin", "tsc"), "-p", project], { cwd: project, timeout: BUILD_TIMEOUT_MS });

  const env = { ...process.env, COMPACT_HOST_CLIENT_SOURCE: pkg };
  if (!env.COMPACT_HOST_BIN) {
    env.COMPACT_HOST_BIN = join(work, "compact-host");
    run("go build ./cmd/compact-host", ["go", "build", "-o", env.COMPACT_HOST_BIN, "./cmd/compact-host"], { cwd: repo, timeout: BUILD_TIMEOUT_MS });
  }
  const r = spawnSync(process.execPath, ["--test", "dist-test/"], { cwd: project, env, stdio: "inherit", timeout: TEST_TIMEOUT_MS, killSignal: "SIGKILL" });
  if (r.error) {
    throw new Error(`node --test: ${r.error.message}`);
  }
  return r.status ?? 1;
}
