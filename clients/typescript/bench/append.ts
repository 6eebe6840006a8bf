/**
 * Sequential `appendEvent` (one event per call through one session object, as ADK-TS's Runner
 * appends) through `LedgerSessionService` over HTTP, and through ADK-TS's own database service on
 * PostgreSQL, round by round in turn. Run by the repository's `bench/bench_typescript.py`, which
 * starts the server and the databases and reads the JSON this prints: events/s per round for each,
 * and each of our appends' time (ms, HTTP on loopback).
 *
 * Environment: BASE_URL, TOKEN (a --write token), PEER_PG_URL, ROUNDS, PER_ROUND, TEXTS (a JSON list).
 */

import { createPostgresSessionService, Event, type BaseSessionService, type Session } from "@iqai/adk";
import { LedgerSessionService } from "../src/index.js";

const { BASE_URL, TOKEN, PEER_PG_URL } = process.env;
const ROUNDS = Number(process.env.ROUNDS ?? 8);
const PER_ROUND = Number(process.env.PER_ROUND ?? 50);
const TEXTS: string[] = JSON.parse(process.env.TEXTS ?? '["hello", "hi, how can I help?"]');

async function rounds(name: string, service: BaseSessionService, latencies?: number[]): Promise<number[]> {
  const session: Session = await service.createSession("bench", "bench", {}, `${name}-${Date.now()}`);
  const rates: number[] = [];
  let n = 0;
  for (let round = 0; round < ROUNDS; round++) {
    const started = performance.now();
    for (let i = 0; i < PER_ROUND; i++, n++) {
      const user = n % 2 === 0;
      const event = new Event({ author: user ? "user" : "assistant", invocationId: `inv-${Math.floor(n / 2)}`, content: { role: user ? "user" : "model", parts: [{ text: TEXTS[n % TEXTS.length] }] } });
      const one = performance.now();
      await service.appendEvent(session, event);
      latencies?.push(performance.now() - one);
    }
    rates.push(PER_ROUND / ((performance.now() - started) / 1000));
  }
  return rates;
}

async function main(): Promise<void> {
  if (!BASE_URL || !TOKEN || !PEER_PG_URL) throw new Error("BASE_URL, TOKEN and PEER_PG_URL are needed");
  const ours = new LedgerSessionService({ baseUrl: BASE_URL, token: TOKEN });
  const theirs = createPostgresSessionService(PEER_PG_URL);
  await rounds("warm", ours);
  await rounds("warm", theirs);
  const latencies: number[] = [];
  const ledger: number[] = [];
  const adk: number[] = [];
  for (let turn = 0; turn < 3; turn++) { // the two alternate, so a slow spell of the machine hits both
    ledger.push(...(await rounds(`ledger${turn}`, ours, latencies)));
    adk.push(...(await rounds(`adk${turn}`, theirs)));
  }
  await (theirs as any).db?.destroy?.();
  process.stdout.write(JSON.stringify({ ledger, adk, latencies }) + "\n");
}

await main();
