// Compiles src/ into dist/ (index.js and index.d.ts) with the typescript
// pinned by package-lock.json. It is the package's prepare script, so it
// runs wherever npm builds the package: `npm pack`, `npm ci` here, and
// `npm i /path/to/clients/typescript` in another project. In that last
// case npm links this directory without installing its devDependencies,
// so a missing compiler is installed here first, from the lock file.

import { spawnSync } from "node:child_process";
import { existsSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const pkg = dirname(dirname(fileURLToPath(import.meta.url)));
const tsc = join(pkg, "node_modules", "typescript", "bin", "tsc");
// Hang guards for a shared, busy machine, not speed requirements.
const INSTALL_TIMEOUT_MS = 600_000;
const COMPILE_TIMEOUT_MS = 300_000;

function run(what, cmd, args, timeout) {
  const r = spawnSync(cmd, args, { cwd: pkg, stdio: ["ignore", "inherit", "inherit"], timeout });
  if (r.error) {
    console.error(`compact-host-client: ${what}: ${r.error.message}`);
    process.exit(1);
  }
  if (r.status !== 0) {
    console.error(`compact-host-client: ${what} failed (${r.signal ?? `exit ${r.status}`}) in ${pkg}`);
    process.exit(1);
  }
}

if (!existsSync(tsc)) {
  const npm = process.env.npm_execpath;
  // Inside an npm script npm_execpath is npm's own CLI; run it with this node.
  const [cmd, args] = npm && npm.endsWith(".js") ? [process.execPath, [npm]] : ["npm", []];
  console.error(`compact-host-client: installing its compiler (npm ci) in ${pkg}`);
  run("npm ci (the devDependencies that build dist/)", cmd, [...args, "ci", "--ignore-scripts", "--no-audit", "--no-fund"], INSTALL_TIMEOUT_MS);
}
rmSync(join(pkg, "dist"), { recursive: true, force: true });
run("tsc -p tsconfig.json", process.execPath, [tsc, "-p", join(pkg, "tsconfig.json")], COMPILE_TIMEOUT_MS);
