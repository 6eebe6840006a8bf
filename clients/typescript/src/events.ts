/**
 * ADK-TS `Event`s as ledger events and back, exactly.
 *
 * The ledger event keeps the whole ADK-TS event as JSON text (`metadata.adk_ts`; a text, so the
 * ledger checks and hashes one string) and a chat message read from its content, so the ledger's
 * compaction, recall and audit tools see a conversation they understand. An event the ledger wrote
 * itself (a compaction's summary) or a Python agent appended reads back as an ADK-TS event made
 * from its message.
 */

import { Event, EventActions, State } from "@iqai/adk";
import type { LedgerEvent } from "./api.js";

/** The metadata key holding the ADK-TS event's JSON text. */
export const ADK_TS_KEY = "adk_ts";

/** `temp:` keys are the invocation's only: never stored, in the state or in the event. */
export function withoutTemp(delta: Record<string, unknown> | undefined): Record<string, unknown> {
  const kept: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(delta ?? {})) {
    if (!key.startsWith(State.TEMP_PREFIX)) kept[key] = value;
  }
  return kept;
}

/** The ledger event for an ADK-TS event. */
export function toLedger(event: Event): LedgerEvent {
  const stateDelta = withoutTemp(event.actions?.stateDelta);
  const stored = { ...event, actions: { ...event.actions, stateDelta } };
  return {
    id: event.id,
    message: messageOf(event),
    metadata: { [ADK_TS_KEY]: JSON.stringify(stored, jsonable) },
    branch: event.branch || null,
    invocation_id: event.invocationId || null,
    state_delta: stateDelta,
    timestamp: isoTime(event.timestamp),
  };
}

/** The ADK-TS event of a ledger event. */
export function toAdk(event: LedgerEvent): Event {
  const text = event.metadata?.[ADK_TS_KEY];
  if (typeof text === "string") {
    const data = JSON.parse(text) as Record<string, any>;
    const { actions, longRunningToolIds, ...rest } = data;
    const adk = new Event({ author: data.author, content: data.content });
    Object.assign(adk, rest);
    adk.actions = new EventActions(actions ?? {});
    if (Array.isArray(longRunningToolIds)) adk.longRunningToolIds = new Set(longRunningToolIds);
    return adk;
  }
  const user = event.message.type === "user";
  const words = event.message.text ?? "";
  return new Event({
    id: event.id,
    author: user ? "user" : "model",
    invocationId: event.invocation_id ?? "",
    branch: event.branch ?? undefined,
    timestamp: secondsOf(event.timestamp ?? ""),
    content: words ? { role: user ? "user" : "model", parts: [{ text: words }] } : undefined,
    actions: new EventActions({ stateDelta: event.state_delta ?? {} }),
  });
}

/** What the event says, as a chat message: function responses are a tool message, the user's
 * content a user message, anything else (an agent's text and calls) an assistant message. */
function messageOf(event: Event): LedgerEvent["message"] {
  const parts: any[] = event.content?.parts ?? [];
  const responses = parts.filter((p) => p.functionResponse).map((p) => p.functionResponse);
  if (responses.length) {
    return {
      type: "tool",
      tool_responses: responses.map((r) => ({
        id: r.id ?? "",
        name: r.name ?? "",
        content: JSON.stringify(r.response ?? null),
      })),
    };
  }
  const text = parts
    .filter((p) => typeof p.text === "string" && !p.thought)
    .map((p) => p.text)
    .join("\n");
  if (event.author === "user" || event.content?.role === "user") return { type: "user", text };
  const calls = parts
    .filter((p) => p.functionCall)
    .map((p) => ({ id: p.functionCall.id ?? "", name: p.functionCall.name ?? "", arguments: JSON.stringify(p.functionCall.args ?? {}) }));
  return { type: "assistant", text: text || null, tool_calls: calls };
}

/** A `Set` as its array, an `Error` left out: what `JSON.stringify` would lose or mangle. */
function jsonable(_key: string, value: unknown): unknown {
  if (value instanceof Set) return [...value];
  if (value instanceof Error) return undefined;
  return value;
}

/** ADK's event time (seconds since the epoch, maybe fractional) as ISO-8601 with microseconds. */
export function isoTime(seconds: number): string {
  if (!Number.isFinite(seconds)) throw new Error(`an event's timestamp must be a number of seconds, not ${seconds}`);
  let whole = Math.floor(seconds);
  let micros = Math.round((seconds - whole) * 1e6);
  if (micros === 1e6) {
    whole += 1;
    micros = 0;
  }
  const base = new Date(whole * 1000).toISOString().slice(0, 19);
  return `${base}.${String(micros).padStart(6, "0")}+00:00`;
}

/** Seconds since the epoch of the ledger's ISO-8601 time (microseconds kept). */
export function secondsOf(iso: string): number {
  const match = /^(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?(.*)$/.exec(iso);
  if (!match) return Date.parse(iso) / 1000;
  const whole = Date.parse(`${match[1]}${match[3] || "Z"}`) / 1000;
  return whole + Number(`0.${match[2] ?? "0"}`);
}
