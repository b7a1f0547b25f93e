// Type declarations of edgebase.js, the JavaScript SDK of edgebase.
// Compatible with TypeScript 4.8 and later. Reference: docs/sdk-js.md.

/** Any JSON value. */
export type JSONValue = string | number | boolean | null | JSONValue[] | { [key: string]: JSONValue };
/** A JSON object, the shape of a document's data. */
export type JSONObject = { [key: string]: JSONValue };

/** Where the session is kept: localStorage or anything with its synchronous methods. */
export interface StorageAdapter {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
  removeItem(key: string): void;
}

/**
 * A key/value store for the persistent cache and the write queue. Every method is
 * async; values are JSON (store a copy: the SDK may change the object it passed).
 * Write your own over any storage (SQLite, AsyncStorage, ...); memoryAdapter,
 * indexedDBAdapter and fileAdapter are the built-in ones.
 */
export interface CacheAdapter {
  /** The value stored under key, or undefined. */
  get(key: string): Promise<JSONValue | undefined>;
  set(key: string, value: JSONValue): Promise<void>;
  /** Deleting a missing key is not an error. */
  delete(key: string): Promise<void>;
  /** Every key that starts with prefix ("" for all), sorted. */
  keys(prefix: string): Promise<string[]>;
  /** Optional: [key, value] of every key under prefix, sorted, in one call (else keys, then a get each). */
  entries?(prefix: string): Promise<[string, JSONValue][]>;
  /** Optional: many sets and deletes in one call, ideally one transaction (else one call each, in order). */
  batch?(ops: CacheBatchOp[]): Promise<void>;
  /**
   * Optional: runs fn while holding an exclusive lock named name across every client of
   * the same storage (other tabs or processes); resolves when fn's promise settles. The
   * write queue elects its leader with it when navigator.locks is absent; opts.signal
   * aborts a wait for the lock (the client closed).
   */
  lock?(name: string, fn: () => Promise<unknown>, opts?: { signal?: AbortSignal }): Promise<unknown>;
}

/** One operation of CacheAdapter.batch. */
export type CacheBatchOp = { key: string; value: JSONValue; delete?: false } | { key: string; delete: true };

/**
 * createClient's persistence option: where the cache and the write queue live.
 * 'indexeddb' is one database per project and URL (browsers); 'file:<dir>' one file per
 * key in dir (Node); 'memory' lasts as long as the page or process.
 */
export type Persistence = 'memory' | 'indexeddb' | `file:${string}` | CacheAdapter | {
  adapter: CacheAdapter;
  /** Names the storage for the tabs' leader lock and channel (default "<projectId>:<url>"): clients of one storage share it. */
  name?: string;
};

/** The members of a WebSocket the SDK uses (the WHATWG one, or a compatible one). */
export interface WebSocketLike {
  send(data: string): void;
  close(code?: number, reason?: string): void;
  onopen: ((ev: any) => void) | null;
  onmessage: ((ev: { data: any }) => void) | null;
  onerror: ((ev: any) => void) | null;
  onclose: ((ev: { code: number; reason: string }) => void) | null;
}

export interface ClientOptions {
  /** The node's base URL, e.g. "https://db.example.com" (in a browser, default: the page's origin). */
  url?: string;
  projectId: string;
  apiKey?: string;
  /** Default: localStorage in browsers, memory elsewhere. */
  storage?: StorageAdapter;
  /** Default: the global fetch. */
  fetch?: (input: string, init?: any) => Promise<any>;
  /** Default: the global WebSocket. */
  WebSocket?: new (url: string) => WebSocketLike;
  /** Retries of a safe request answered 429 or 503 (default 3). */
  retries?: number;
  /** The longest Retry-After (seconds) the SDK waits out itself (default 10); longer ones are thrown. */
  maxRetryWait?: number;
  /** Per-request timeout in ms (default 30000; 0: none). */
  timeout?: number;
  /** Backoff bounds in ms of realtime reconnects (defaults 100 and 5000) and of the write queue's retries (defaults 250 and 30000). */
  minBackoff?: number;
  maxBackoff?: number;
  /** Realtime ping interval in ms (default 20000; 0: no pings). */
  pingInterval?: number;
  /**
   * Keep a persistent cache (documents read, subscriptions' snapshots) and queue the
   * writes (db.set, update, deleteField, delete) durably: the app works offline. Default: none.
   */
  persistence?: Persistence;
  /**
   * Session consistency (default true): every read sends X-Min-Revision and every new
   * subscription minRevision = the highest revision this client has seen, so it reads its
   * own writes on any node (an edge waits until it has applied them). false: no such
   * headers (the revision is still tracked).
   */
  session?: boolean;
  /** Start the session at this revision: another client's sessionRevision, carried over. */
  sessionRevision?: number;
}

/** Every failure of the SDK. */
export class EdgebaseError extends Error {
  constructor(o: {
    status?: number; code?: string; message?: string; field?: string | null;
    retryAfter?: number | null; requestId?: string | null; unknownOutcome?: boolean; cause?: unknown;
    conflict?: Conflict;
  });
  name: 'EdgebaseError';
  /** HTTP status; 0 when no answer arrived. */
  status: number;
  /**
   * The API's error code ("invalid_path", "rate_limited", ...), or network_error, websocket_unavailable,
   * connection_closed, not_cached (source: 'cache' and nothing cached), persistence_unavailable,
   * cache_unreadable (a subscription's error event: its cached documents could not be read).
   */
  code: string;
  field: string | null;
  /** Seconds, from Retry-After. */
  retryAfter: number | null;
  requestId: string | null;
  /** The write may or may not have been applied: read before retrying it. */
  unknownOutcome: boolean;
  /** A queued write's conflict (status 412, code precondition_failed): retry or discard it. */
  conflict?: Conflict;
}

export interface User {
  id: string;
  email: string;
  name: string;
  role: 'owner' | 'user' | string;
  totpEnabled: boolean;
  createdAt: string;
  /** The user proved the address (an emailed code or link, or a provider that vouches for it). */
  emailVerified: boolean;
  /** True for an anonymous account (email ""), until an email or provider is linked. */
  anonymous?: boolean;
  /** True while an owner has disabled the account. */
  disabled?: boolean;
  /** The OAuth/OIDC providers linked to the account. */
  providers?: string[];
}

export interface Session {
  token: string;
  user: User | null;
}

/** Added to the answer of every write: the revision it committed at (X-Revision). */
export interface Revisioned {
  revision?: number;
}

export interface SignedIn extends Revisioned {
  token: string;
  user: User;
}

export type LoginResult =
  | (SignedIn & { requiresTotp: false })
  | (Revisioned & { requiresTotp: true; loginTicket: string; expiresIn: number });

export interface Ok extends Revisioned {
  ok: true;
}

export interface Enrollment extends Revisioned {
  secret: string;
  otpauthUrl: string;
  /** Base64 PNG of otpauthUrl. */
  qrPng: string;
}

export interface Auth {
  register(email: string, password: string, name?: string): Promise<SignedIn>;
  login(email: string, password: string): Promise<LoginResult>;
  loginVerify(loginTicket: string, code: string): Promise<SignedIn>;
  logout(): Promise<Ok | { ok: true }>;
  me(opts?: { minRevision?: number }): Promise<User>;
  changePassword(currentPassword: string, newPassword: string): Promise<SignedIn & Ok>;
  /** With an emailed code ({email, emailCode, newPassword}) or an authenticator's verify token. */
  resetPassword(reset: PasswordReset): Promise<Ok>;
  resetPassword(email: string, verifyToken: string, newPassword: string): Promise<Ok>;
  reauthenticate(password: string, code?: string): Promise<Ok>;
  disableTotp(code: string): Promise<Revisioned & { totpEnabled: false; user: User }>;
  enrollAuthenticator(): Promise<Enrollment>;
  confirmAuthenticator(code: string): Promise<Revisioned & { totpEnabled: true; recoveryCodes: string[] }>;
  verifyAuthenticator(email: string, code: string): Promise<{ verifyToken: string; expiresIn: number }>;
  /** Emails the signed-in user a code (and a link when the project set emailActionUrl). */
  sendVerification(): Promise<Ok & { alreadyVerified?: true }>;
  /** Proves an address; resolves to the user with emailVerified true. */
  verifyEmail(proof: { email: string; code: string } | { token: string }): Promise<User>;
  /** The same answer whether or not the account exists. */
  requestPasswordReset(email: string): Promise<Ok>;
  /** The same answer whether or not the account exists; never creates an account. */
  requestEmailCode(email: string): Promise<Ok>;
  loginWithEmailCode(email: string, code: string): Promise<LoginResult>;
  /** With the token of the emailed sign-in link. */
  loginWithEmailCode(link: { token: string }): Promise<LoginResult>;
  /** Without code: a code goes to newEmail. With it: the address changes. Needs a recent login. */
  changeEmail(newEmail: string): Promise<Revisioned & { ok: true; codeSent: true }>;
  changeEmail(newEmail: string, code: string): Promise<Revisioned & { user: User }>;
  /** With the token of the emailed change-email link. */
  changeEmail(link: { token: string }): Promise<Revisioned & { user: User }>;
  /** Needs a recent login; signs out here. */
  deleteAccount(): Promise<Revisioned & { ok: true; deleted: true }>;
  signInAnonymously(): Promise<SignedIn>;
  /** Gives the signed-in anonymous account an email and password; same uid and data. */
  linkEmail(email: string, password: string): Promise<SignedIn>;
  /** The project's sign-in providers (no sign-in needed). */
  oauthProviders(): Promise<OAuthProviderSummary[]>;
  /** The URL to open in the browser to sign in with provider; the node returns to redirect?code=... */
  oauthStartUrl(provider: string, redirect: string): string;
  /** Trades the redirect's one-time code for a session, like login. */
  oauthExchange(code: string): Promise<LoginResult>;
  /** The provider's authorization URL (open it in the browser) whose sign-in links provider to the signed-in account. */
  oauthLink(provider: string, redirect: string): Promise<Revisioned & { url: string }>;
  listSessions(): Promise<SessionInfo[]>;
  revokeSession(sessionId: string): Promise<Ok>;
  token(): string | null;
  user(): User | null;
  /** cb runs after every change of the session token; returns an unsubscribe. */
  onChange(cb: (session: Session | null) => void): () => void;
}

export type PasswordReset =
  | { email: string; emailCode: string; newPassword: string }
  | { token: string; newPassword: string }
  | { email: string; verifyToken: string; newPassword: string };

/** One of the signed-in user's sessions. */
export interface SessionInfo {
  id: string;
  createdAt: string;
  /** Updated at most once an hour. */
  lastUsedAt: string;
  /** The client address the session was created from. */
  address: string;
  userAgent: string;
  /** The session of this client. */
  current: boolean;
}

export interface OAuthProviderSummary {
  provider: string;
  issuer: string;
}

export interface UserPage {
  users: User[] | null;
  /** Pass back as cursor; "" on the last page. */
  nextCursor: string;
}

export interface APIKeyCreated extends Revisioned {
  id: string;
  name: string;
  /** The secret: shown only here. Send it as apiKey. */
  key: string;
  createdAt: string;
}

export interface APIKeyInfo {
  id: string;
  name: string;
  createdAt: string;
  /** The key's first characters. */
  prefix: string;
}

export type AuditEventType =
  | 'login' | 'login-failed-threshold' | 'logout' | 'register' | 'totp-enabled' | 'totp-disabled'
  | 'password-changed' | 'password-reset' | 'email-verified' | 'email-changed' | 'role-changed'
  | 'account-disabled' | 'account-enabled' | 'account-deleted' | 'sessions-revoked' | 'key-created'
  | 'key-deleted' | 'oauth-linked' | 'anonymous-linked' | 'smtp-changed';

export interface AuditEvent {
  id: string;
  time: string;
  type: AuditEventType | string;
  userId: string;
  actorId: string;
  address: string;
  detail: { [key: string]: string } | null;
}

export interface AuditPage {
  events: AuditEvent[] | null;
  nextCursor: string;
}

export interface SMTPSettings {
  host: string;
  port: number;
  username?: string;
  /** Sealed with the cluster's secret key; never shown again. */
  password?: string;
  from: string;
  fromName?: string;
  security?: 'starttls' | 'tls' | 'none';
}

export interface SMTPSettingsInfo {
  host: string;
  port: number;
  username: string;
  from: string;
  fromName: string;
  security: 'starttls' | 'tls' | 'none';
  passwordSet: boolean;
}

export type EmailKind = 'verification' | 'password-reset' | 'sign-in-code' | 'change-email';

/** Go text/template (html: html/template) with {{.Code}} {{.Link}} {{.Email}} {{.NewEmail}} {{.Project}} {{.ExpiresMinutes}}. */
export interface EmailTemplate {
  subject: string;
  text: string;
  html?: string;
}

export interface EmailTemplateInfo {
  subject: string;
  text: string;
  html: string;
  /** false: the built-in default. */
  custom: boolean;
}

export interface AuthSettings {
  anonymousSignIn: boolean;
  /** Emailed links open emailActionUrl?mode=...&token=...&project=...; "" for codes only. */
  emailActionUrl: string;
}

export interface OAuthProviderConfig {
  clientId: string;
  clientSecret: string;
  /** Required for a provider other than google, apple or github: an OpenID Connect issuer. */
  issuer?: string;
  scopes?: string[];
  /** The app URLs a sign-in may return to. */
  redirectUrls: string[];
}

export interface OAuthProvider {
  provider: string;
  clientId: string;
  issuer: string;
  scopes: string[] | null;
  redirectUrls: string[] | null;
  secretSet: boolean;
}

/** A session of an account as its owner sees it (admin.users.sessions). */
export interface UserSessionInfo {
  id: string;
  createdAt: string;
  lastUsedAt: string;
  address: string;
  userAgent: string;
}

/** The project owner's administration (403 forbidden for anyone else). */
export interface Admin {
  users: {
    list(opts?: { query?: string; cursor?: string; limit?: number }): Promise<UserPage>;
    get(id: string): Promise<User>;
    /** Ends the account's sessions on every node; its sign-ins fail with account_disabled. */
    disable(id: string): Promise<Revisioned & { user: User }>;
    enable(id: string): Promise<Revisioned & { user: User }>;
    revokeSessions(id: string): Promise<Ok>;
    delete(id: string): Promise<Revisioned & { ok: true; deleted: true }>;
    /** The set-role action: another account of the project becomes an owner or a user. */
    setRole(id: string, role: 'owner' | 'user'): Promise<Revisioned & { user: User }>;
    /** The account's sessions. */
    sessions(id: string): Promise<UserSessionInfo[]>;
    /** Ends one session of the account. */
    revokeSession(id: string, sessionId: string): Promise<Ok>;
  };
  keys: {
    create(name: string): Promise<APIKeyCreated>;
    list(): Promise<APIKeyInfo[]>;
    /** The key stops working on every node at once; the last key cannot be deleted (last_key). */
    delete(id: string): Promise<Ok>;
  };
  audit: {
    /** Newest first. */
    list(opts?: { cursor?: string; limit?: number; userId?: string; type?: AuditEventType }): Promise<AuditPage>;
  };
  smtp: {
    /** Null when the project uses the cluster's default server. */
    get(): Promise<SMTPSettingsInfo | null>;
    set(settings: SMTPSettings): Promise<SMTPSettingsInfo & Revisioned>;
    delete(): Promise<Ok>;
  };
  emailTemplates: {
    list(): Promise<{ [kind in EmailKind]: EmailTemplateInfo }>;
    set(kind: EmailKind, template: EmailTemplate): Promise<EmailTemplateInfo & Revisioned>;
    /** Restores the built-in template. */
    reset(kind: EmailKind): Promise<Ok>;
  };
  authSettings: {
    get(): Promise<AuthSettings>;
    set(settings: Partial<AuthSettings>): Promise<AuthSettings & Revisioned>;
  };
  oauthProviders: {
    list(): Promise<OAuthProviderSummary[]>;
    get(provider: string): Promise<OAuthProvider>;
    set(provider: string, config: OAuthProviderConfig): Promise<OAuthProvider & Revisioned>;
    delete(provider: string): Promise<Ok>;
  };
}

export interface Document<T = JSONObject> {
  collection: string;
  /** With persistence: the local view (the server's version with the queued writes applied). */
  data: T;
  /**
   * The server revision the data is based on. Typed number, but with persistence a document
   * that exists only locally (pendingWrites, created by a queued write not yet acknowledged)
   * has null here: check before passing it as ifMatch.
   */
  revision: number;
  createTime: string;
  updateTime: string;
  /** Answered from the persistent cache, not the server (offline, or source: 'cache'). */
  fromCache?: boolean;
  /** At least one queued write touches this document: data shows it applied. */
  pendingWrites?: boolean;
}

export interface ReadOptions {
  consistency?: 'strong' | 'local';
  /** Wait (at most 5 s on the node) until it has applied this revision (X-Min-Revision). */
  minRevision?: number;
  /**
   * With persistence: 'default' asks the server and answers from the cache on a network
   * failure; 'server' never uses the cache; 'cache' answers the local view without a request.
   */
  source?: 'default' | 'server' | 'cache';
}

export interface WriteOptions {
  /** Write only if the document's revision is this (0: only if it does not exist). */
  ifMatch?: number;
  /**
   * With persistence: queue the write without a base (last writer wins). Otherwise a queued
   * write is based on the revision the local view shows (ifMatch), and a change on the
   * server in between is a conflict.
   */
  blind?: boolean;
}

export interface ListOptions extends ReadOptions {
  /** 1..1000, default 50. */
  limit?: number;
  pageToken?: string;
}

export interface ListPage<T = JSONObject> {
  documents: Document<T>[];
  /** Present while more children follow; a page may be empty and still have one. */
  nextPageToken?: string;
  /** The page came from the persistent cache (offline, or source: 'cache'); its documents show the local view. */
  fromCache?: boolean;
}

export type FieldType = 'string' | 'number' | 'integer' | 'boolean' | 'object' | 'array' | 'null' | 'timestamp';

export interface FieldUpdate {
  oldKey: string;
  /** Default: oldKey (set the field's value). */
  newKey?: string;
  value: JSONValue;
  type?: FieldType;
}

export type BatchWrite = { ifMatch?: number; collection: string } & (
  | { op: 'set'; data: JSONObject }
  | { op: 'update'; oldKey: string; newKey: string; value: JSONValue; type?: FieldType }
  | { op: 'delete' }
  | { op: 'deleteField'; field: string }
  | { op: 'increment'; field: string; by: number }
  | { op: 'serverTimestamp'; field: string }
  | { op: 'arrayUnion' | 'arrayRemove'; field: string; values: JSONValue[] }
);

export interface BatchResult {
  revision: number;
  results: { collection: string; revision: number; exists: boolean }[];
}

export interface Rule {
  match: string;
  read: string;
  write: string;
}

export type WhereOp = '==' | '!=' | '<' | '<=' | '>' | '>=' | 'in' | 'not-in' | 'array-contains' | 'array-contains-any' | 'exists';

export interface Where {
  /** A field, dotted for nested objects ("address.city"). */
  field: string;
  op: WhereOp;
  value: JSONValue;
}

export interface OrderBy {
  field: string;
  direction?: 'asc' | 'desc';
}

/** A query's body (POST /api/db/query); see docs/api.md for the value order and the operators. */
export interface Query {
  /** The collection whose direct children are queried; with collectionGroup, a collection name. */
  collection: string;
  /** Every collection of that name, at any depth. */
  collectionGroup?: boolean;
  where?: Where[];
  orderBy?: OrderBy[];
  /** 1..1000, default 50. */
  limit?: number;
  /** The nextCursor of the previous page. */
  startAfter?: string;
  /** Only these (dotted) fields of each document's data. */
  select?: string[];
}

export interface QueryPage<T = JSONObject> {
  documents: Document<T>[];
  /** Present while more results may follow. */
  nextCursor?: string;
  /**
   * With persistence: the query's last answer, from the cache (offline, or source: 'cache'),
   * its documents as the local view shows them (the query is not evaluated again).
   */
  fromCache?: boolean;
}

/** A live query: a query without startAfter. */
export type LiveQuery = Omit<Query, 'startAfter'>;

export interface Child {
  /** The segment, e.g. "u1". */
  name: string;
  /** Its full path, e.g. "users/u1". */
  path: string;
  /** A document exists at path. */
  document: boolean;
  /** Something is below path. */
  children: boolean;
}

export interface ChildrenPage {
  children: Child[];
  nextPageToken?: string;
}

export interface RulesTest {
  op: 'read' | 'write';
  path: string;
  /** Absent or "": an unauthenticated caller. */
  userId?: string;
  /** For a write: request.data (absent: a delete). */
  data?: JSONObject;
  /** Absent: the rules in force. */
  rules?: Rule[];
}

export interface RulesTestResult {
  allowed: boolean;
  /** Index of the deciding rule; -1 when no rule matched. */
  rule: number;
  match: string;
  expression: string;
  auth: { uid: string; role: string; email: string } | null;
  /** The evaluation error (then allowed is false). */
  error?: string;
}

export interface IndexField {
  field: string;
  direction?: 'asc' | 'desc';
}

export interface IndexDefinition {
  collection: string;
  collectionGroup?: boolean;
  fields: IndexField[];
}

export interface IndexInfo extends IndexDefinition {
  id: string;
  state: 'building' | 'ready' | string;
}

export interface Db {
  /** The document, or null when there is none. */
  get<T = JSONObject>(path: string, opts?: ReadOptions): Promise<Document<T> | null>;
  list<T = JSONObject>(path: string, opts?: ListOptions): Promise<ListPage<T>>;
  // With persistence, set, update, deleteField and delete are queued: the local view shows
  // them at once, and the promise settles when the server decides (offline: later; after a
  // restart, never: use client.writes.on). A 412 rejects with error.conflict.
  set<T extends JSONObject = JSONObject>(path: string, data: T, opts?: WriteOptions): Promise<Document<T> & { created: boolean }>;
  update<T = JSONObject>(path: string, change: FieldUpdate, opts?: WriteOptions): Promise<Document<T>>;
  deleteField<T = JSONObject>(path: string, field: string, opts?: WriteOptions): Promise<Document<T>>;
  delete(path: string, opts?: WriteOptions): Promise<{ deleted: true; revision: number }>;
  batch(writes: BatchWrite[]): Promise<BatchResult>;
  /** Counts the results the caller may read. */
  query(q: Query & { count: true }, opts?: ReadOptions): Promise<{ count: number; fromCache?: boolean }>;
  /** Runs a query: one page of results in the query's order, readable by the caller. */
  query<T = JSONObject>(q: Query, opts?: ReadOptions): Promise<QueryPage<T>>;
  /** Owner only. */
  getRules(): Promise<{ rules: Rule[] }>;
  /** Owner only. */
  setRules(rules: Rule[]): Promise<Revisioned & { rules: Rule[] }>;
  /** The direct child segments of path ("" = the root), owner only. */
  children(path: string, opts?: ListOptions): Promise<ChildrenPage>;
  /** Evaluates the rules for one request without saving, owner only. */
  testRules(t: RulesTest): Promise<RulesTestResult>;
  /** The declared indexes with their state on the answering node, owner only. */
  getIndexes(opts?: ReadOptions): Promise<{ indexes: IndexInfo[] }>;
  /** Replaces the whole list of indexes, owner only. */
  setIndexes(indexes: IndexDefinition[]): Promise<Revisioned & { indexes: IndexInfo[] }>;
}

export interface SnapshotEvent<T = JSONObject> {
  type: 'snapshot';
  documents: Document<T>[];
  revision: number;
  /**
   * With persistence: served from the cache at once, before the network; the subscription
   * then resumes (the missed changes, then 'resumed') or resets (a fresh snapshot).
   */
  fromCache?: boolean;
}

export interface ChangeEvent<T = JSONObject> {
  type: 'change';
  collection: string;
  /** The subscription's revision: a local change (local: true) does not move it. */
  revision: number;
  changeType: 'set' | 'delete';
  /** Null for a delete. With persistence: the local view. */
  data: T | null;
  /** Null for a local change. */
  updateTime: string | null;
  /** Queued writes still touch the document: data is the local view, not yet the server's. */
  pendingWrites?: boolean;
  /**
   * A change of the local view, not of the server: a queued write made, acknowledged after
   * the subscription already passed its revision, refused or discarded.
   */
  local?: boolean;
}

/** The change log no longer reaches back (or access changed): a fresh snapshot follows. */
export interface ResetEvent {
  type: 'reset';
  revision: number;
}

/**
 * Only with {resumeEvents: true}: after a reconnect the subscription resumed
 * without a new snapshot; the missed changes (if any) came before this event.
 */
export interface ResumedEvent {
  type: 'resumed';
  revision: number;
}

/** The server ended the subscription (forbidden, invalid_path, ...). */
export interface ErrorEvent {
  type: 'error';
  error: EdgebaseError;
}

export type RealtimeEvent<T = JSONObject> = SnapshotEvent<T> | ChangeEvent<T> | ResetEvent | ResumedEvent | ErrorEvent;

export interface SubscribeOptions {
  /** Also include every document below the path, at any depth. */
  prefix?: boolean;
  /** Also deliver a {type:'resumed'} event after each reconnect that resumed without a snapshot. */
  resumeEvents?: boolean;
}

export interface Subscription {
  readonly id: string;
  /** The last revision delivered. */
  readonly revision: number;
  unsubscribe(): void;
}

/** A change of a live query's window. */
export interface QueryChangeEvent<T = JSONObject> {
  type: 'change';
  changeType: 'added' | 'modified' | 'removed';
  collection: string;
  /** The document's position in the window after the change (for removed: before it). */
  index: number;
  revision: number;
  /** Null for removed. */
  data: T | null;
  updateTime: string | null;
}

export type QueryEvent<T = JSONObject> = SnapshotEvent<T> | QueryChangeEvent<T> | ResetEvent | ResumedEvent | ErrorEvent;

export interface QuerySubscribeOptions {
  /** Also deliver a {type:'resumed'} event after each reconnect that resumed without a snapshot. */
  resumeEvents?: boolean;
}

export interface QuerySubscription<T = JSONObject> extends Subscription {
  /** The window as last delivered, in query order. */
  readonly docs: Document<T>[];
}

export interface Notification {
  type: 'notification';
  id: string;
  title: string;
  body: string;
  data: { [key: string]: string } | null;
  category: 'general' | 'marketing' | 'security' | string;
  revision: number;
  [key: string]: unknown;
}

export type RealtimeStatus =
  | { state: 'idle' }
  | { state: 'connecting' }
  | { state: 'ready'; userId: string; revision: number }
  | { state: 'disconnected'; code?: number; error: EdgebaseError; retryIn: number }
  | { state: 'stopped'; code?: number; error: EdgebaseError };

export interface Realtime {
  subscribe<T = JSONObject>(path: string, opts: SubscribeOptions, onEvent: (ev: RealtimeEvent<T>) => void): Subscription;
  subscribe<T = JSONObject>(path: string, onEvent: (ev: RealtimeEvent<T>) => void): Subscription;
  /** A live query; onEvent gets each event and the window after it, in query order. */
  subscribeQuery<T = JSONObject>(q: LiveQuery, onEvent: (ev: QueryEvent<T>, docs: Document<T>[]) => void, opts?: QuerySubscribeOptions): QuerySubscription<T>;
  onNotification(cb: (n: Notification) => void): () => void;
  onStatus(cb: (s: RealtimeStatus) => void): () => void;
  readonly status: RealtimeStatus;
  reconnect(): void;
  close(): void;
}

export type Platform = 'android' | 'ios' | 'web';

export interface Device {
  token: string;
  platform: Platform;
  userId: string;
  registeredAt: string;
}

export interface Preferences {
  pushEnabled: boolean;
  emailEnabled: boolean;
  marketingEnabled: boolean;
  securityEnabled: boolean;
  quietHoursEnabled: boolean;
  /** HH:MM */
  quietHoursStart: string;
  quietHoursEnd: string;
  /** IANA name, e.g. "Europe/Paris". */
  timezone: string;
}

export interface Message {
  title: string;
  body?: string;
  data?: { [key: string]: string };
  category?: 'general' | 'marketing' | 'security';
}

export type Target = { project: true } | { userId: string } | { topic: string };

export interface ScheduledNotification extends Revisioned {
  id: string;
  projectId: string;
  title: string;
  body: string;
  data?: { [key: string]: string } | null;
  category: string;
  target: Partial<{ project: boolean; userId: string; topic: string; users: string[] }>;
  sendAt: string;
  status: 'scheduled' | 'cancelled' | 'fired' | string;
  createdAt: string;
  createdBy: string;
  firedAt?: string;
  notificationId?: string;
}

export interface HistoryItem {
  id: string;
  title: string;
  body: string;
  data: { [key: string]: string } | null;
  category: string;
  target: Partial<{ project: boolean; userId: string; topic: string; users: string[] }>;
  status: string;
  createdAt: string;
  sentAt: string | null;
  targets: number;
  delivered: number;
  failed: number;
  pruned: number;
  skipped: number;
  deferred: number;
  lastError?: string;
}

export interface PageOptions {
  /** 1..100, default 20. */
  limit?: number;
  cursor?: string;
}

export interface Sent extends Revisioned {
  notificationId: string;
  status: 'queued' | string;
  targets: number;
}

export interface FCMCredentialsInfo {
  configured: boolean;
  fcmProjectId: string;
  clientEmail: string;
  updatedAt: string;
}

export interface Push {
  register(token: string, platform?: Platform): Promise<Revisioned & { token: string; platform: Platform; registeredAt: string }>;
  unregister(token: string): Promise<Ok>;
  /** The caller's devices; an owner may name another user. */
  devices(opts?: { userId?: string }): Promise<Device[]>;
  subscribe(topic: string): Promise<Revisioned & { topic: string; subscribed: true }>;
  unsubscribe(topic: string): Promise<Revisioned & { topic: string; subscribed: false }>;
  /** The caller's topics; an owner may name another user. */
  topics(opts?: { userId?: string }): Promise<string[]>;
  /** Every topic of the project with its subscribers, owner only. */
  projectTopics(): Promise<{ topic: string; subscribers: number }[]>;
  /** Owner only. */
  pushEnabled(): Promise<{ projectId: string; pushEnabled: boolean }>;
  /** Owner only; never the key. */
  getCredentials(): Promise<FCMCredentialsInfo>;
  /** The service-account JSON file as Firebase gives it (object or string), owner only. */
  setCredentials(serviceAccount: JSONObject | string): Promise<FCMCredentialsInfo & Revisioned>;
  getPreferences(): Promise<Preferences>;
  setPreferences(prefs: Partial<Preferences>): Promise<Preferences & Revisioned>;
  history(opts?: PageOptions): Promise<{ notifications: HistoryItem[]; nextCursor: string }>;
  /** target is for owners only. */
  schedule(n: Message & { sendAt: string; target?: Target }): Promise<ScheduledNotification>;
  scheduled(opts?: PageOptions): Promise<{ scheduled: ScheduledNotification[]; nextCursor: string }>;
  cancel(id: string): Promise<ScheduledNotification>;
  /** Owner only. */
  togglePush(enabled: boolean): Promise<Revisioned & { projectId: string; pushEnabled: boolean }>;
  sendToProject(n: Message): Promise<Sent>;
  sendToUser(userId: string, n: Message): Promise<Sent>;
  sendToTopic(topic: string, n: Message): Promise<Sent>;
}

export type TriggerEventType = 'create' | 'update' | 'delete';

/** Signed POSTs of each event to url (Edgebase-Signature: t=<unix s>,v1=<hex HMAC-SHA256(secret, "<t>." + body)>). */
export interface WebhookAction {
  url: string;
  /** Optional on put (the server makes one, answered once); never answered again. */
  secret?: string;
  /** The secret's last 4 characters (answers only). */
  secretHint?: string;
  /** Extra request headers. */
  headers?: Record<string, string>;
}

/** A notification through the push pipeline (preferences, quiet hours, the push switch apply). */
export interface PushTriggerAction {
  to: 'user' | 'topic' | 'project';
  /** CEL giving the user id (to: user). */
  userIdFrom?: string;
  /** Template giving the topic (to: topic). */
  topic?: string;
  /** Templates: text with {{ expr }} parts. */
  title: string;
  body: string;
  data?: Record<string, string>;
  category?: string;
}

/** A derived write, as one write of db.batch; collection and string values are templates. */
export interface WriteTriggerAction {
  op: 'set' | 'update' | 'delete' | 'deleteField' | 'increment' | 'serverTimestamp' | 'arrayUnion' | 'arrayRemove';
  collection: string;
  data?: JSONObject;
  oldKey?: string;
  newKey?: string;
  value?: JSONValue;
  type?: FieldType;
  field?: string;
  by?: number | string;
  values?: JSONValue[] | string;
}

/** Exactly one member. */
export type TriggerAction =
  | { webhook: WebhookAction; push?: never; write?: never }
  | { push: PushTriggerAction; webhook?: never; write?: never }
  | { write: WriteTriggerAction; webhook?: never; push?: never };

/** What put sends: a path pattern as the access rules spell them, e.g. "orders/{id}". */
export interface TriggerDefinition {
  match: string;
  /** Default: all three. */
  on?: TriggerEventType[];
  /** CEL over before, after, path, revision, type, time, params: must be true to fire. */
  condition?: string;
  action: TriggerAction;
  /** Stops deliveries; events meanwhile are delivered when enabled again. */
  disabled?: boolean;
}

/** A trigger's delivery progress. */
export interface TriggerStatus {
  /** Every matching change up to this revision is delivered, parked or dead. */
  cursor: number;
  /** The applied revision minus cursor. */
  lagRevisions: number;
  /** Events waiting for a retry (or behind one on their path). */
  pending: number;
  deadLetters: number;
  delivered: number;
  /** Failed attempts. */
  failed: number;
  dead: number;
  /** Changes that did not fire: past the loop depth limit. */
  loopStops: number;
  lastError?: string;
  /** RFC 3339. */
  lastErrorAt?: string;
  lastSuccessAt?: string;
}

export interface Trigger extends TriggerDefinition {
  name: string;
  createdAt: string;
  updatedAt: string;
  status: TriggerStatus;
}

/** An event that was not delivered (retries exhausted, or refused at once). */
export interface DeadLetter {
  /** The dead letter's key, what replay takes (not the delivery's Idempotency-Key, trigger:revision:path). */
  id: string;
  /** The trigger's name. */
  trigger: string;
  project: string;
  revision: number;
  path: string;
  type: TriggerEventType;
  before: JSONObject | null;
  after: JSONObject | null;
  params?: Record<string, string>;
  time: string;
  depth?: number;
  attempts: number;
  firstAttemptAt?: number;
  nextAttemptAt?: number;
  lastError?: string;
  deadAt: string;
}

/** The project's triggers, owner only. */
export interface Triggers {
  /** Sorted by name. */
  list(): Promise<Trigger[]>;
  /** null when there is none of that name. */
  get(name: string): Promise<Trigger | null>;
  /** Creates (created: true) or replaces; a webhook's secret is answered only when made by the server or sent. */
  put(name: string, def: TriggerDefinition): Promise<{ trigger: Trigger; created: boolean; revision: number | null }>;
  delete(name: string): Promise<Revisioned & { deleted: true }>;
  deadLetters(name: string, opts?: { limit?: number; pageToken?: string }): Promise<{ deadLetters: DeadLetter[]; nextPageToken?: string }>;
  /** The dead letters of ids, or all of them (at most 1000 a call), back to the queue. */
  replay(name: string, ids?: string[]): Promise<Revisioned & { replayed: number }>;
}

/** A write of the queue (with persistence), as stored. */
export interface PendingWrite {
  id: string;
  op: 'set' | 'update' | 'deleteField' | 'delete';
  path: string;
  /** set's data. */
  data?: JSONObject;
  /** update's change. */
  change?: FieldUpdate;
  /** deleteField's field. */
  field?: string;
  /** The base: the revision the write expects (0: absent); null for a blind write. */
  ifMatch: number | null;
  /** ISO 8601. */
  createdAt: string;
  /** 'uncertain': sent without an answer; the SDK reads the document before sending it again. */
  state: 'queued' | 'sending' | 'uncertain' | 'conflict';
  /** For a conflict: the server's version after the 412 (null: absent). */
  server?: Document | null;
}

/** What a write answers: set's Document plus created, update's and deleteField's Document, delete's {deleted, revision}. */
export type WriteResult = (Document & { created?: boolean }) | { deleted: true; revision: number };

/** A queued write the server refused with 412 (its base is no longer the server's version). */
export interface Conflict {
  /** The write's id. */
  id: string;
  path: string;
  write: PendingWrite;
  /** What the local view showed with the write applied (null: absent). */
  local: Document | null;
  /** The server's version now (null: absent). */
  server: Document | null;
  /**
   * Sends the write again based on the server's version. retry(data): set(path, data)
   * instead; retry(null): delete(path); both based on the server's version, in the same
   * place in the queue. Settles like the write's own promise.
   */
  retry(data?: JSONObject | null): Promise<WriteResult>;
  /** Drops the write: the local view goes back to the server's version (plus later queued writes). */
  discard(): Promise<void>;
}

/** The events of client.writes.on: fired in every tab of the same storage. */
export interface WriteEvents {
  conflict: Conflict;
  /** The server applied the write. */
  acked: { write: PendingWrite; result: WriteResult };
  /** The server refused the write (4xx but 401, 412, 429): it is gone, the local view went back. */
  rejected: { write: PendingWrite; error: EdgebaseError };
  /** After any change of the queue: the counts. */
  change: { pending: number; conflicts: number };
}

/** The write queue (with persistence; without it, always empty). */
export interface Writes {
  /** Every queued write, oldest first, conflicts included. */
  pending(): Promise<PendingWrite[]>;
  /** The writes in conflict (also after a restart). */
  conflicts(): Promise<Conflict[]>;
  /** Returns an unsubscribe. */
  on<K extends keyof WriteEvents>(type: K, cb: (ev: WriteEvents[K]) => void): () => void;
  /** Resolves once nothing is left to send (empty, or conflicts only); offline it waits. */
  settled(): Promise<void>;
  /** Tries now, cutting a backoff short. */
  replay(): void;
  /** This client (tab) is the one that replays the queue. */
  readonly leader: boolean;
}

export interface EdgebaseClient {
  auth: Auth;
  db: Db;
  realtime: Realtime;
  push: Push;
  /** The project's triggers (owner only). */
  triggers: Triggers;
  /** Owner administration of the project. */
  admin: Admin;
  /** The write queue (with persistence). */
  writes: Writes;
  readonly url: string;
  readonly projectId: string;
  /** The highest revision this client has seen (session consistency); 0 at first. */
  readonly sessionRevision: number;
  /** Records a revision seen elsewhere (never moves back); returns sessionRevision. */
  observeRevision(revision: number): number;
  /** Resolves when every write to the persistent cache asked for so far is stored (at once without persistence). */
  flush(): Promise<void>;
  /**
   * Closes the realtime connection, releases the write queue's leadership and the tabs'
   * channel; resolves once the cache is stored and the lock released.
   */
  close(): Promise<void>;
}

export function createClient(options: ClientOptions): EdgebaseClient;

/** The persistent cache in memory: gone with the page or process. */
export function memoryAdapter(): CacheAdapter;
/** IndexedDB (browsers): one database of that name, one object store "kv". Throws persistence_unavailable without indexedDB. */
export function indexedDBAdapter(name: string): CacheAdapter;
/** Files (Node): one file per key in dir, written atomically; lock() with a lock file. */
export function fileAdapter(dir: string): CacheAdapter;
export default createClient;

export interface OperatorOptions {
  /** The node's base URL; in a browser, the page's origin by default. */
  url?: string;
  /** The cluster's admin token (--admin-token). */
  adminToken: string;
  fetch?: (input: string, init?: any) => Promise<any>;
  /** Retries of safe requests on 429/503/network errors (default 3). */
  retries?: number;
  /** Longest wait before a retry, in seconds (default 10). */
  maxRetryWait?: number;
  /** Milliseconds until a request without an answer fails (default 30000). */
  timeout?: number;
}

export interface ProjectInfo {
  id: string;
  name: string;
  createdAt: string;
  documents: number;
  bytes: number;
  lastWrite: { revision: number; time: string } | null;
  /** The count stopped at the scan limit: documents and bytes are lower bounds. */
  approximate?: boolean;
}

export interface ProjectCreated extends Revisioned {
  projectId: string;
  /** Shown once: the server keeps only its hash. */
  apiKey: string;
  ownerId: string;
}

export interface NodeStatus {
  id: string;
  httpAddr: string;
  raftAddr: string;
  voter: boolean;
  /** leader, follower, candidate, unreachable, ... */
  state: string;
  appliedIndex: number;
}

export interface ClusterStatus {
  leader: string;
  nodes: NodeStatus[];
}

export interface Backup {
  blob: Blob;
  filename: string;
  revision: number | null;
}

export interface OperatorClient {
  readonly url: string;
  projects: {
    list(opts?: { limit?: number; cursor?: string }): Promise<{ projects: ProjectInfo[]; nextCursor: string }>;
    create(p: { name: string; ownerEmail: string; ownerPassword: string }): Promise<ProjectCreated>;
    /** Makes the project's account with this email an owner. */
    setOwner(id: string, email: string): Promise<Revisioned & { user: User }>;
  };
  cluster: {
    status(): Promise<ClusterStatus>;
    removeNode(id: string): Promise<{ removed: string }>;
    /** Hands the leadership to voter id (absent: any other voter); answers once done. */
    transferLeadership(id?: string): Promise<{ leader: string }>;
  };
  /** A backup of the whole cluster (GET /admin/backup). */
  backup(): Promise<Backup>;
  /** The Prometheus text of GET /metrics of the node at url. */
  metrics(): Promise<string>;
}

export function createOperator(options: OperatorOptions): OperatorClient;
