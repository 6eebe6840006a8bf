/**
 * An ADK-TS agent on the ledger: an `LlmAgent` with a scripted model (a `BaseLlm` subclass, no
 * network) runs two turns through ADK-TS's `Runner`, and the session is then the ledger's: its
 * events are what `sessionledger events` prints, and `sessionledger verify` passes.
 */

import { BaseLlm, LlmAgent, type LlmRequest, LlmResponse, Runner } from "@iqai/adk";
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { LedgerSessionService } from "../src/index.js";
import { type Server, startServer } from "./server.js";

/** Answers each request with the text of its last user message, reversed. */
class ScriptedModel extends BaseLlm {
  readonly requests: LlmRequest[] = [];

  constructor() {
    super("scripted");
  }

  protected async *generateContentAsyncImpl(request: LlmRequest): AsyncGenerator<LlmResponse, void, unknown> {
    this.requests.push(request);
    const said = request.contents.filter((c) => c.role === "user").at(-1)?.parts?.[0]?.text ?? "";
    yield new LlmResponse({ content: { role: "model", parts: [{ text: [...said].reverse().join("") }] }, turnComplete: true });
  }
}

let server: Server;
before(async () => (server = await startServer()));
after(async () => server?.stop());

test("an ADK-TS agent runs two turns on the ledger, and the CLI shows and verifies the session", async () => {
  const model = new ScriptedModel();
  const agent = new LlmAgent({ name: "echo", description: "Echoes, reversed.", model, instruction: "Answer briefly." });
  const sessionService = new LedgerSessionService({ baseUrl: server.baseUrl, token: await server.token("alice") });
  const runner = new Runner({ appName: "shop", agent, sessionService });
  const session = await sessionService.createSession("shop", "alice", { plan: "basic" }, "chat-1");

  const replies: string[] = [];
  for (const text of ["hello there", "second turn"]) {
    for await (const event of runner.runAsync({ userId: "alice", sessionId: session.id, newMessage: { role: "user", parts: [{ text }] } })) {
      const reply = event.content?.parts?.[0]?.text;
      if (event.author === "echo" && reply) replies.push(reply);
    }
  }
  assert.deepEqual(replies, ["ereht olleh", "nrut dnoces"]);
  const secondRequest = model.requests.at(-1)!.contents.map((c) => c.parts?.[0]?.text);
  assert.deepEqual(secondRequest, ["hello there", "ereht olleh", "second turn"]); // history read back from the ledger

  const stored = await sessionService.getSession("shop", "alice", "chat-1");
  assert.deepEqual(
    stored!.events.map((e) => [e.author, e.content?.parts?.[0]?.text]),
    [["user", "hello there"], ["echo", "ereht olleh"], ["user", "second turn"], ["echo", "nrut dnoces"]],
  );
  assert.equal(stored!.state.plan, "basic");

  const printed = JSON.parse(await server.cli("events", "shop/alice/chat-1", "--user", "alice", "--json")) as any[];
  assert.deepEqual(
    printed.map((e) => [e.message.type, e.message.text]),
    [["user", "hello there"], ["assistant", "ereht olleh"], ["user", "second turn"], ["assistant", "nrut dnoces"]],
  );
  assert.deepEqual(printed.map((e) => e.id), stored!.events.map((e) => e.id));
  const verified = await server.cli("verify", "shop/alice/chat-1");
  assert.match(verified, /ok|verified/i);
});
