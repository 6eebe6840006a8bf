/**
 * The sessionledger HTTP session API (`sessionledger serve`, routes under `/api/v1/`), as typed calls.
 *
 * One request per call, over `node:http(s)` with a keep-alive agent of the client's own: an append
 * is one small request after another on one connection, and Node's `fetch` (undici) took 0.3-0.5 ms
 * more per request than `http.request` (a fifth of an append's time on loopback). The server's
 * `{"error": ...}` answers become `LedgerApiError`s carrying the status, and a 409 on an append a
 * `StaleSessionError`.
 */

import http from "node:http";
import https from "node:https";

/** An event in the ledger's own JSON, as `sessionledger events --json` prints one. */
export interface LedgerEvent {
  id: string;
  session_id?: string;
  archived?: boolean;
  message: {
    type: "user" | "assistant" | "system" | "tool";
    text?: string | null;
    tool_calls?: { id: string; name: string; arguments: string }[];
    tool_responses?: { id: string; name: string; content: string }[];
    metadata?: Record<string, unknown>;
  };
  metadata?: Record<string, unknown>;
  branch?: string | null;
  invocation_id?: string | null;
  state_delta?: Record<string, unknown>;
  timestamp?: string;
}

/** A session as the API answers it (`events` only where the route reads them). */
export interface LedgerSession {
  id: string;
  app_name: string;
  user_id: string;
  ledger_id: string;
  created_at: string;
  last_update_time: number;
  state: Record<string, unknown>;
  events?: LedgerEvent[];
  version?: number;
}

export interface AppendAnswer {
  event: LedgerEvent;
  version: number;
  stored: boolean;
}

/** The server refused a request: `status` is its HTTP status, the message its one-line reason. */
export class LedgerApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = "LedgerApiError";
  }
}

/** An append through a session object that missed another writer's change (HTTP 409): nothing was
 * stored; read the session again and append to the fresh copy. The text is ADK-TS's own. */
export class StaleSessionError extends LedgerApiError {
  constructor(reason: string) {
    super(409, `${reason}. Please check if it is a stale session.`);
    this.name = "StaleSessionError";
  }
}

export interface LedgerApiOptions {
  /** The server, e.g. `http://127.0.0.1:8080` (the API is under `/api/v1/`). */
  baseUrl: string;
  /** A token from `sessionledger token create --user USER --write`. */
  token: string;
}

export class LedgerApi {
  private readonly root: URL;
  private readonly headers: Record<string, string>;
  private readonly transport: typeof http | typeof https;
  private readonly agent: http.Agent;

  constructor({ baseUrl, token }: LedgerApiOptions) {
    if (!baseUrl) throw new Error("baseUrl is needed, e.g. http://127.0.0.1:8080");
    if (!token) throw new Error("token is needed: sessionledger token create --user USER --write");
    this.root = new URL(`${baseUrl.replace(/\/+$/, "")}/api/v1/apps/`);
    this.headers = { authorization: `Bearer ${token}`, "content-type": "application/json" };
    this.transport = this.root.protocol === "https:" ? https : http;
    this.agent = new this.transport.Agent({ keepAlive: true }); // an idle socket holds no exit up (unref'd)
  }

  createSession(app: string, sessionId: string | undefined, state: Record<string, unknown> | undefined) {
    return this.call<LedgerSession>("POST", `${seg(app)}/sessions`, { session_id: sessionId, state });
  }

  /** The session, or `undefined` when the token's user has none of that id in the app. */
  async getSession(
    app: string,
    sessionId: string,
    query: { num_recent_events?: number; after?: number } = {},
  ): Promise<LedgerSession | undefined> {
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(query)) if (value !== undefined) params.set(key, String(value));
    const search = params.size ? `?${params}` : "";
    return this.orMissing(this.call<LedgerSession>("GET", `${seg(app)}/sessions/${seg(sessionId)}${search}`));
  }

  listSessions(app: string) {
    return this.call<{ sessions: LedgerSession[] }>("GET", `${seg(app)}/sessions`);
  }

  async deleteSession(app: string, sessionId: string): Promise<void> {
    await this.call<void>("DELETE", `${seg(app)}/sessions/${seg(sessionId)}`);
  }

  endSession(app: string, sessionId: string): Promise<LedgerSession | undefined> {
    return this.orMissing(this.call<LedgerSession>("POST", `${seg(app)}/sessions/${seg(sessionId)}/end`));
  }

  /** Append `event` while the session is at `expectedVersion` (`StaleSessionError` otherwise). */
  async appendEvent(app: string, sessionId: string, event: LedgerEvent, expectedVersion?: number) {
    try {
      return await this.call<AppendAnswer>("POST", `${seg(app)}/sessions/${seg(sessionId)}/events`, {
        event,
        expected_version: expectedVersion,
      });
    } catch (error) {
      if (error instanceof LedgerApiError && error.status === 409) throw new StaleSessionError(error.message);
      throw error;
    }
  }

  /** The token's user and its state in the app (the `user:` keys without the prefix). */
  userState(app: string) {
    return this.call<{ user_id: string; state: Record<string, unknown> }>("GET", `${seg(app)}/state`);
  }

  /** Recall: events matching `q` in one session (`sessionId`) or every session of the user. */
  search(app: string, q: string, options: { sessionId?: string; matchMode?: "any" | "all"; page?: number } = {}) {
    const params = new URLSearchParams({ q });
    if (options.sessionId !== undefined) params.set("session_id", options.sessionId);
    if (options.matchMode !== undefined) params.set("match_mode", options.matchMode);
    if (options.page !== undefined) params.set("page", String(options.page));
    return this.call<{ results: { timestamp: string; type: string; text: string; sessionId?: string }[] }>(
      "GET",
      `${seg(app)}/search?${params}`,
    );
  }

  private async orMissing<T>(answer: Promise<T>): Promise<T | undefined> {
    try {
      return await answer;
    } catch (error) {
      if (error instanceof LedgerApiError && error.status === 404) return undefined;
      throw error;
    }
  }

  private async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    const { status, text } = await this.send(method, path, body === undefined ? undefined : JSON.stringify(body));
    if (status === 204) return undefined as T;
    if (status < 200 || status > 299) {
      let reason = text;
      try {
        reason = (JSON.parse(text) as { error?: string }).error ?? text;
      } catch {
        // not JSON (a proxy's page): its text is the reason
      }
      throw new LedgerApiError(status, `sessionledger ${method} ${path}: ${status} ${reason}`);
    }
    return JSON.parse(text) as T;
  }

  private send(method: string, path: string, body: string | undefined): Promise<{ status: number; text: string }> {
    const headers = body === undefined ? this.headers : { ...this.headers, "content-length": Buffer.byteLength(body) };
    return new Promise((resolve, reject) => {
      const request = this.transport.request(new URL(this.root.href + path), { method, headers, agent: this.agent }, (response) => {
        const chunks: Buffer[] = [];
        response.on("data", (chunk: Buffer) => chunks.push(chunk));
        response.on("end", () => resolve({ status: response.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }));
        response.on("error", reject);
      });
      request.on("error", reject);
      request.end(body);
    });
  }
}

function seg(part: string): string {
  if (!part) throw new Error("app names and session ids must not be empty");
  return encodeURIComponent(part);
}
