/**
 * The same random operations against ADK-TS's own `InMemorySessionService` and ours (over a real
 * `sessionledger serve`), every answer compared. Seeded: a failure names its seed and step.
 *
 * Compared as ADK-TS's persistent (database) service keeps sessions, where the in-memory one
 * departs from it: `temp:` keys (the in-memory base class skips `temp_` keys, so it keeps `temp:`
 * ones) are left out of both sides, no delta sets `null` (the in-memory service deletes the key,
 * the database service and the ledger keep `null`), initial states hold no `app:`/`user:` keys (the
 * in-memory service keeps them in the session), ids are never created twice (it overwrites a
 * session, the ledger refuses) and a session's `lastUpdateTime` is compared once it has events
 * (before, each side's is its own clock's creation time). A partial event carries no delta and the
 * time of the session's last event: the in-memory service applies a partial event's `app:` and
 * `user:` deltas and takes its time, the database service (and ours) stores nothing of it.
 */

import { Event, EventActions, InMemorySessionService, type Session } from "@iqai/adk";
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { LedgerSessionService } from "../src/index.js";
import { type Server, startServer } from "./server.js";

const USER = "alice";
const KEYS = ["k1", "k2", "app:shared", "user:pref", "temp:scratch"];
const SEQUENCES = Number(process.env.DIFFERENTIAL_SEQUENCES ?? 6);
const STEPS = Number(process.env.DIFFERENTIAL_STEPS ?? 60);

let server: Server;
let token: string;
before(async () => {
  server = await startServer();
  token = await server.token(USER);
});
after(async () => server?.stop());

function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function plain(value: unknown): unknown {
  return value === undefined ? undefined : JSON.parse(JSON.stringify(value, (_, v) => (v instanceof Set ? [...v] : v)));
}

function withoutTemp(state: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(state).filter(([key]) => !key.startsWith("temp:")));
}

function view(session: Session | undefined, withTime: boolean) {
  if (!session) return undefined;
  return {
    id: session.id,
    appName: session.appName,
    userId: session.userId,
    state: withoutTemp(session.state),
    events: session.events.map((e) => ({
      id: e.id,
      author: e.author,
      invocationId: e.invocationId,
      branch: e.branch,
      timestamp: e.timestamp,
      content: plain(e.content),
      stateDelta: withoutTemp(e.actions?.stateDelta ?? {}),
      partial: e.partial,
    })),
    lastUpdateTime: withTime ? session.lastUpdateTime : undefined,
  };
}

for (let seed = 1; seed <= SEQUENCES; seed++) {
  test(`random sequence ${seed}: ADK-TS's InMemorySessionService and LedgerSessionService agree`, async () => {
    const next = random(seed);
    const APPS = [`app-a-${seed}`, `app-b-${seed}`]; // the server's app and user state outlive a sequence
    const pick = <T>(items: T[]): T => items[Math.floor(next() * items.length)];
    const theirs = new InMemorySessionService();
    const ours = new LedgerSessionService({ baseUrl: server.baseUrl, token });
    const live: { app: string; id: string; mine: Session; other: Session }[] = [];
    const gone: { app: string; id: string }[] = [];
    let clock = 1_700_000_000 + seed * 100_000;
    let counter = 0;

    for (let step = 0; step < STEPS; step++) {
      const where = `seed ${seed}, step ${step}`;
      const roll = next();
      if (roll < 0.15 || live.length === 0) {
        const app = pick(APPS);
        const id = `s${seed}-${counter++}`;
        const state = next() < 0.5 ? { k1: Math.floor(next() * 100), k2: "x" } : undefined;
        const other = await theirs.createSession(app, USER, state && { ...state }, id);
        const mine = await ours.createSession(app, USER, state && { ...state }, id);
        assert.deepEqual(view(mine, false), view(other, false), where);
        live.push({ app, id, mine, other });
      } else if (roll < 0.6) {
        const target = pick(live);
        const delta: Record<string, unknown> = {};
        for (const key of KEYS) if (next() < 0.3) delta[key] = pick([1, "two", [3], { four: 4 }, true]);
        // a partial event is not stored (the database service's rule), but the in-memory service
        // applies its app:/user: deltas and takes its time as lastUpdateTime: none, and the last time
        const last = target.other.events.at(-1)?.timestamp;
        const partial = last !== undefined && next() < 0.1;
        if (partial) for (const key of Object.keys(delta)) delete delta[key];
        else clock += 1 + Math.floor(next() * 3);
        const fields = {
          id: `e${counter++}`,
          author: pick(["user", "agent"]),
          invocationId: `inv-${Math.floor(next() * 5)}`,
          timestamp: partial ? last : clock,
          content: { role: "user", parts: [{ text: `message ${counter}` }] },
          partial,
        };
        const event = () => new Event({ ...fields, actions: new EventActions({ stateDelta: { ...delta } }) });
        await theirs.appendEvent(target.other, event());
        await ours.appendEvent(target.mine, event());
        assert.deepEqual(view(target.mine, true), view(target.other, true), where);
      } else if (roll < 0.8) {
        const target = pick(live);
        const config = pick([undefined, { numRecentEvents: 1 + Math.floor(next() * 4) }, { afterTimestamp: clock - Math.floor(next() * 8) }, { numRecentEvents: 0 }]);
        const other = await theirs.getSession(target.app, USER, target.id, config);
        const mine = await ours.getSession(target.app, USER, target.id, config);
        const timed = (other?.events.length ?? 0) > 0 && config === undefined;
        assert.deepEqual(view(mine, timed), view(other, timed), `${where}: getSession ${JSON.stringify(config)}`);
        if (mine && other) Object.assign(target, { mine, other }); // later appends go through the fresh copies
        if (config !== undefined && mine && other) {
          // a filtered copy is no base for appends: read whole copies again
          target.mine = (await ours.getSession(target.app, USER, target.id))!;
          target.other = (await theirs.getSession(target.app, USER, target.id))!;
        }
      } else if (roll < 0.9) {
        const app = pick(APPS);
        const other = await theirs.listSessions(app, USER);
        const mine = await ours.listSessions(app, USER);
        const ids = (r: { sessions: Session[] }) => r.sessions.map((s) => [s.id, s.appName, s.userId, s.state, s.events]);
        assert.deepEqual(ids(mine), ids(other), where);
      } else {
        const deleteLive = next() < 0.7 && live.length > 0;
        const target = deleteLive ? live.splice(Math.floor(next() * live.length), 1)[0] : pick(gone.length ? gone : [{ app: APPS[0], id: "never" }]);
        await theirs.deleteSession(target.app, USER, target.id);
        await ours.deleteSession(target.app, USER, target.id);
        if (deleteLive) gone.push(target);
        assert.equal(await ours.getSession(target.app, USER, target.id), undefined, where);
        assert.equal(await theirs.getSession(target.app, USER, target.id), undefined, where);
      }
    }
  });
}
