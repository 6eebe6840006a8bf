/**
 * A real `sessionledger serve` for the tests: a subprocess on a free port over a SQLite ledger in a
 * temporary directory, with tokens made by `sessionledger token create`; `stop()` ends the process
 * and removes the directory. The command is `$SESSIONLEDGER_BIN`, else the repository's
 * `.venv/bin/sessionledger`. A test process that ends otherwise (Ctrl-C, SIGTERM) still kills the
 * server and removes the directory on its way out.
 */

import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const run = promisify(execFile);
const here = dirname(fileURLToPath(import.meta.url));
export const CLI = process.env.SESSIONLEDGER_BIN ?? resolve(here, "../../../../.venv/bin/sessionledger");

export interface Server {
  baseUrl: string;
  databaseUrl: string;
  /** A new token for `user` (`--write` unless `write` is false). */
  token(user: string, write?: boolean): Promise<string>;
  /** `sessionledger ARGS --database-url URL`, its stdout (throws on a non-zero exit). */
  cli(...args: string[]): Promise<string>;
  stop(): Promise<void>;
}

export async function startServer(databaseUrl?: string): Promise<Server> {
  const dir = mkdtempSync(join(tmpdir(), "sl-ts-"));
  const url = databaseUrl ?? `sqlite:///${join(dir, "ledger.db")}`;
  const cli = async (...args: string[]) => (await run(CLI, [...args, "--database-url", url], { timeout: 60_000 })).stdout;
  let child: ChildProcess | undefined;
  const leftovers = () => { // however the test process ends (a failure, Ctrl-C): no server, no files
    child?.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  };
  process.once("exit", leftovers);
  for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => process.exit(130));
  const stop = async () => {
    process.removeListener("exit", leftovers);
    if (child && child.exitCode === null) {
      const exited = new Promise((done) => child!.once("exit", done));
      child.kill("SIGTERM");
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await cli("migrate");
    const port = await freePort();
    child = spawn(CLI, ["serve", "--port", String(port), "--database-url", url], { stdio: ["ignore", "ignore", "pipe"] });
    let errors = "";
    child.stderr!.on("data", (chunk) => (errors += chunk));
    const baseUrl = `http://127.0.0.1:${port}`;
    await until(baseUrl, child, () => errors);
    return {
      baseUrl,
      databaseUrl: url,
      cli,
      stop,
      token: async (user, write = true) => {
        const out = await cli("token", "create", "--user", user, ...(write ? ["--write"] : []));
        return out.trim().split("\n").at(-1)!;
      },
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const probe = createServer();
    probe.once("error", fail);
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address();
      probe.close(() => done(typeof address === "object" && address ? address.port : 0));
    });
  });
}

async function until(baseUrl: string, child: ChildProcess, errors: () => string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`sessionledger serve exited: ${errors()}`);
    try {
      if ((await fetch(`${baseUrl}/api/v1/openapi.json`)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((wait) => setTimeout(wait, 100));
  }
  throw new Error(`sessionledger serve did not answer within 30 s: ${errors()}`);
}
