/**
 * `LedgerSessionService` against a real `sessionledger serve`: two writers (one wins, the other is
 * stale and nothing of it is stored, and after a fresh read nothing is lost), ADK-TS's state and
 * event rules, the token's user and rights, and recall through the API.
 */

import { Event, EventActions } from "@iqai/adk";
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { LedgerApiError, LedgerSessionService, StaleSessionError } from "../src/index.js";
import { type Server, startServer } from "./server.js";

let server: Server;
let alice: string;
before(async () => {
  server = await startServer();
  alice = await server.token("alice");
});
after(async () => server?.stop());

const said = (text: string, stateDelta: Record<string, unknown> = {}, author = "user") =>
  new Event({ author, content: { role: author === "user" ? "user" : "model", parts: [{ text }] }, actions: new EventActions({ stateDelta }) });

test("two writers on one session: one wins, the stale one stores nothing, and after a fresh read both events are kept", async () => {
  const one = new LedgerSessionService({ baseUrl: server.baseUrl, token: alice });
  const two = new LedgerSessionService({ baseUrl: server.baseUrl, token: alice });
  await one.createSession("race", "alice", {}, "shared");
  const [a, b] = await Promise.all([one.getSession("race", "alice", "shared"), two.getSession("race", "alice", "shared")]);
  const outcomes = await Promise.allSettled([one.appendEvent(a!, said("from one")), two.appendEvent(b!, said("from two"))]);
  const lost = outcomes.filter((o) => o.status === "rejected") as PromiseRejectedResult[];
  assert.equal(lost.length, 1, "exactly one writer is stale");
  assert.ok(lost[0].reason instanceof StaleSessionError && /stale session/.test(lost[0].reason.message));
  const stored = await one.getSession("race", "alice", "shared");
  assert.equal(stored!.events.length, 1, "the stale append stored nothing");

  const loser = outcomes[0].status === "rejected" ? { service: one, text: "from one" } : { service: two, text: "from two" };
  const fresh = await loser.service.getSession("race", "alice", "shared");
  await loser.service.appendEvent(fresh!, said(loser.text));
  const both = await one.getSession("race", "alice", "shared");
  assert.deepEqual(both!.events.map((e) => e.content?.parts?.[0]?.text).sort(), ["from one", "from two"]);

  // many writers at once, each retrying on a stale copy: every event is kept, once
  const writers = Array.from({ length: 6 }, () => new LedgerSessionService({ baseUrl: server.baseUrl, token: alice }));
  await Promise.all(
    writers.map(async (service, n) => {
      const event = said(`writer ${n}`);
      for (;;) {
        const copy = await service.getSession("race", "alice", "shared");
        try {
          return await service.appendEvent(copy!, event);
        } catch (error) {
          if (!(error instanceof StaleSessionError)) throw error;
        }
      }
    }),
  );
  const all = await one.getSession("race", "alice", "shared");
  assert.equal(all!.events.length, 8);
  assert.equal(new Set(all!.events.map((e) => e.id)).size, 8);
});

test("an append retried after it was stored (its answer lost) is stored once, and the session shows it once", async () => {
  const service = new LedgerSessionService({ baseUrl: server.baseUrl, token: alice });
  const session = await service.createSession("retry", "alice", {}, "once");
  const copy = (await service.getSession("retry", "alice", "once"))!;
  const event = said("only once", { n: 1 });
  await service.appendEvent(session, event);
  await service.appendEvent(copy, event); // the copy is stale, yet the id is the ledger's already: 200
  assert.deepEqual(copy.events.map((e) => e.id), [event.id]);
  assert.deepEqual(copy.state, { n: 1 });
  await service.appendEvent(copy, said("next")); // and the copy is current again
  assert.equal((await service.getSession("retry", "alice", "once"))!.events.length, 2);
});

test("state prefixes, temp keys, null values, partial events, GetSessionConfig and lastUpdateTime follow ADK-TS", async () => {
  const service = new LedgerSessionService({ baseUrl: server.baseUrl, token: alice });
  const session = await service.createSession("rules", "alice", { k: 1, "app:theme": "dark", "user:lang": "en", "temp:x": 1 }, "  s1 ");
  assert.equal(session.id, "s1"); // ids are trimmed, as ADK-TS does
  assert.deepEqual(session.state, { k: 1, "app:theme": "dark", "user:lang": "en" });
  const partial = said("typing...");
  partial.partial = true;
  assert.equal(await service.appendEvent(session, partial), partial);
  assert.equal(session.events.length, 0);
  const first = said("hi", { k: null, "user:lang": "fr", "temp:y": 2 });
  first.timestamp = 1_800_000_000;
  const second = said("there", { "app:theme": "light" }, "agent");
  second.timestamp = 1_800_000_005.25;
  await service.appendEvent(session, first);
  await service.appendEvent(session, second);
  assert.equal(session.lastUpdateTime, 1_800_000_005.25);
  assert.deepEqual(session.state, { k: null, "app:theme": "light", "user:lang": "fr" });

  const other = await service.createSession("rules", "alice", undefined, "s2"); // shares app: and user: keys
  assert.deepEqual(other.state, { "app:theme": "light", "user:lang": "fr" });
  assert.deepEqual((await service.api.userState("rules")).state, { lang: "fr" });

  const read = await service.getSession("rules", "alice", "s1");
  assert.deepEqual(read!.state, session.state);
  assert.equal(read!.lastUpdateTime, 1_800_000_005.25);
  assert.deepEqual(read!.events.map((e) => e.id), [first.id, second.id]);
  assert.ok(read!.events[0] instanceof Event && read!.events[0].isFinalResponse !== undefined);
  assert.deepEqual(read!.events[0].actions.stateDelta, { k: null, "user:lang": "fr" }); // no temp: key is stored
  assert.deepEqual((await service.getSession("rules", "alice", "s1", { numRecentEvents: 1 }))!.events.map((e) => e.id), [second.id]);
  assert.deepEqual((await service.getSession("rules", "alice", "s1", { afterTimestamp: 1_800_000_001 }))!.events.map((e) => e.id), [second.id]);
  assert.equal((await service.getSession("rules", "alice", "s1", { numRecentEvents: 0 }))!.events.length, 2);

  const listed = await service.listSessions("rules", "alice");
  assert.deepEqual(listed.sessions.map((s) => [s.id, s.state, s.events]), [["s1", {}, []], ["s2", {}, []]]);
  const ended = await service.endSession("rules", "alice", "s1");
  assert.equal(ended!.events.length, 2);
  await service.deleteSession("rules", "alice", "s2");
  assert.equal(await service.getSession("rules", "alice", "s2"), undefined);
  assert.equal(await service.endSession("rules", "alice", "s2"), undefined);

  const found = await service.api.search("rules", "there", { sessionId: "s1" });
  assert.deepEqual(found.results.map((r) => r.text), ["there"]);
});

test("the token is the user: another user's name is refused, another user's session is invisible, a read-only token cannot write", async () => {
  const mine = new LedgerSessionService({ baseUrl: server.baseUrl, token: alice });
  await mine.createSession("private", "alice", { secret: 42 }, "diary");
  await assert.rejects(mine.getSession("private", "bob", "diary"), /token is user "alice"'s, not "bob"'s/);

  const bob = new LedgerSessionService({ baseUrl: server.baseUrl, token: await server.token("bob") });
  assert.equal(await bob.getSession("private", "bob", "diary"), undefined);
  assert.deepEqual((await bob.listSessions("private", "bob")).sessions, []);
  const own = await bob.createSession("private", "bob", {}, "diary"); // his own, apart from alice's
  assert.deepEqual(own.state, {});

  const reader = new LedgerSessionService({ baseUrl: server.baseUrl, token: await server.token("alice", false) });
  const copy = await reader.getSession("private", "alice", "diary");
  assert.equal(copy!.state.secret, 42);
  await assert.rejects(reader.appendEvent(copy!, said("nope")), (error: unknown) => error instanceof LedgerApiError && error.status === 403);
  await assert.rejects(reader.createSession("private", "alice"), (error: unknown) => error instanceof LedgerApiError && error.status === 403);
  assert.equal((await mine.getSession("private", "alice", "diary"))!.events.length, 0);
  await assert.rejects(
    new LedgerSessionService({ baseUrl: server.baseUrl, token: "sl_0123456789abcdef_wrong" }).listSessions("private", "alice"),
    (error: unknown) => error instanceof LedgerApiError && error.status === 401,
  );
});
