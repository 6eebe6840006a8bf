/** `sessionledger-adk`: ADK-TS's session service on a sessionledger server (`sessionledger serve`). */

export { LedgerApi, LedgerApiError, StaleSessionError } from "./api.js";
export type { AppendAnswer, LedgerApiOptions, LedgerEvent, LedgerSession } from "./api.js";
export { ADK_TS_KEY, toAdk, toLedger } from "./events.js";
export { LedgerSessionService } from "./service.js";
