/**
 * `LedgerSessionService`: ADK-TS's session service on a sessionledger server.
 *
 * One line changes in an ADK-TS application (`new InMemorySessionService()` becomes
 * `new LedgerSessionService({ baseUrl, token })`), and its sessions become ledger sessions:
 * compacted by the workers, searchable by recall, shown on the audit page, verifiable.
 *
 * Semantics are ADK-TS's database service's: `app:` and `user:` keys (of the initial state and of
 * every delta) are the app's and the user's state, `temp:` keys are never stored, a `null` value is
 * stored as `null`, a partial event is not stored, `lastUpdateTime` is the last event's time.
 * Staleness is the ledger's: a session object remembers the `version` it was read at, and an append
 * through a copy that missed another writer's event is refused (`StaleSessionError`, nothing
 * stored) by the server's conditional append, so two writers never lose each other's events.
 * The token names the user: a call for another user is an error, never another user's data.
 */

import { BaseSessionService, type Event, type GetSessionConfig, type ListSessionsResponse, type Session, State } from "@iqai/adk";
import { LedgerApi, type LedgerApiOptions, type LedgerSession } from "./api.js";
import { toAdk, toLedger } from "./events.js";

export class LedgerSessionService extends BaseSessionService {
  /** The HTTP API underneath, for the ledger's own calls (user state, recall search). */
  readonly api: LedgerApi;
  private readonly versions = new WeakMap<Session, number>();
  private user?: Promise<string>;

  constructor(options: LedgerApiOptions) {
    super();
    this.api = new LedgerApi(options);
  }

  async createSession(appName: string, userId: string, state?: Record<string, any>, sessionId?: string): Promise<Session> {
    await this.requireUser(appName, userId);
    const created = await this.api.createSession(appName, sessionId?.trim() || undefined, state);
    return this.toSession(created);
  }

  async getSession(appName: string, userId: string, sessionId: string, config?: GetSessionConfig): Promise<Session | undefined> {
    await this.requireUser(appName, userId);
    const found = await this.api.getSession(appName, sessionId, {
      num_recent_events: config?.numRecentEvents || undefined, // ADK-TS: 0 means no limit
      after: config?.afterTimestamp || undefined,
    });
    return found && this.toSession(found);
  }

  async listSessions(appName: string, userId: string): Promise<ListSessionsResponse> {
    await this.requireUser(appName, userId);
    const { sessions } = await this.api.listSessions(appName);
    return { sessions: sessions.map((s) => ({ ...this.toSession({ ...s, events: [] }), state: {} })) };
  }

  async deleteSession(appName: string, userId: string, sessionId: string): Promise<void> {
    await this.requireUser(appName, userId);
    await this.api.deleteSession(appName, sessionId);
  }

  /** The whole session, for a hand-off (to memory); nothing is deleted (ADK-TS's `endSession`). */
  async endSession(appName: string, userId: string, sessionId: string): Promise<Session | undefined> {
    await this.requireUser(appName, userId);
    const ended = await this.api.endSession(appName, sessionId);
    return ended && this.toSession(ended);
  }

  async appendEvent(session: Session, event: Event): Promise<Event> {
    if (event.partial) return event;
    const answer = await this.api.appendEvent(session.appName, session.id, toLedger(event), this.versions.get(session));
    this.versions.set(session, answer.version);
    if (answer.stored || !session.events.some((e) => e.id === event.id)) {
      this.updateSessionState(session, event);
      session.events.push(event);
    }
    session.lastUpdateTime = event.timestamp;
    return event;
  }

  /** ADK-TS's database service's rule: every key but `temp:` ones, `null` kept as a value. */
  protected updateSessionState(session: Session, event: Event): void {
    for (const [key, value] of Object.entries(event.actions?.stateDelta ?? {})) {
      if (!key.startsWith(State.TEMP_PREFIX)) session.state[key] = value;
    }
  }

  private toSession(found: LedgerSession): Session {
    const session: Session = {
      id: found.id,
      appName: found.app_name,
      userId: found.user_id,
      state: { ...found.state },
      events: (found.events ?? []).map(toAdk),
      lastUpdateTime: found.last_update_time,
    };
    if (found.version !== undefined) this.versions.set(session, found.version);
    return session;
  }

  /** The token is one user's: a call naming another user fails before anything is sent. */
  private async requireUser(appName: string, userId: string): Promise<void> {
    this.user ??= this.api.userState(appName).then((s) => s.user_id);
    this.user.catch(() => (this.user = undefined)); // a failed first call is tried again next time
    const owner = await this.user;
    if (userId !== owner) {
      throw new Error(`this service's token is user ${JSON.stringify(owner)}'s, not ${JSON.stringify(userId)}'s`);
    }
  }
}
