import type { TSchema } from '@sinclair/typebox';
import type { FieldError } from '../errors/catalog.js';
import type { Principal } from '../auth/authenticator.js';
import type { ClientInfo } from '../console/session.js';
import type { Shard } from '../shards/shard.js';
import type { Method } from './router.js';
import type { QuerySpec } from './query.js';
import type { UploadStream } from './upload.js';
import type { EventHub, TextSink } from '../events/hub.js';

export type BodyContentType = 'application/json' | 'application/merge-patch+json';

/**
 * Path ids, checked to lie in 1..2147483647. The router fills exactly the names of the matched
 * route's path, and a handler reads only its own route's names: those are typed as present.
 */
export interface PathParams {
  asset_id: number;
  location_id: number;
  tag_id: number;
  [name: string]: number | undefined;
}

export interface RequestContext {
  requestId: string;
  /** The request's one clock reading (epoch ms): the temporal rule and every other "now" of its handler. */
  now: number;
  method: Method;
  path: string;
  params: PathParams;
  /** Query values parsed by the route's QuerySpec (defaults filled in). */
  query: Record<string, unknown>;
  /** The parsed JSON body (an object, schema-validated) for routes that declare one. */
  body: Record<string, unknown>;
  /** Present on every authenticated route. */
  principal: Principal;
  /** The actor shard that owns the caller's organization (authenticated, org-scoped routes). */
  shard: Shard;
  /** Path parameters a route keeps as text (`Route.textParams`), e.g. a job id. */
  textParams: Record<string, string>;
  /** Request headers some handlers read (empty string when absent). */
  headers: { accept: string; idempotencyKey: string; contentType: string; lastEventId: string };
  /** The body as a stream, for routes that declare `upload`. */
  upload?: UploadStream;
  /** Cookie, origin and address headers (the console's routes read them). */
  client: ClientInfo;
  /** This thread's event streams. */
  streams?: EventHub;
}

/**
 * A streamed answer (exports): `next` returns the next piece of the body, or undefined at its end;
 * the server writes each piece with the socket's backpressure (it asks for the next only when the
 * last one was taken), and calls `close` at the end, on failure and when the client goes away.
 */
export interface ReplyStream {
  next(): string | undefined;
  close(): void;
}

/** A body whose pieces come from elsewhere (a forwarded answer staged in the object store): each piece awaited. */
export interface AsyncReplyStream {
  read(): Promise<Uint8Array | undefined>;
  close(): void;
}

export interface Reply {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
  /**
   * An event stream instead of a body (Server-Sent Events): the headers go out, then `events` gets
   * the sink it writes frames to, and returns what to call when the client goes away.
   */
  events?: (sink: TextSink) => () => void;
  /** A prebuilt body (e.g. YAML, Prometheus text) sent as is with `contentType`. */
  text?: string;
  /** A body written piece by piece (with `contentType`), never held whole. */
  stream?: ReplyStream | AsyncReplyStream;
  contentType?: string;
}

export interface ResponseSpec {
  description: string;
  schema?: TSchema;
  /** Media types of a streamed body (exports), each a document of text: instead of `schema`'s JSON. */
  streamed?: { mediaTypes: readonly string[]; schema: TSchema };
  headers?: Record<string, { description: string; schema: TSchema }>;
}

export interface Route {
  method: Method;
  /** OpenAPI-style template, e.g. `/api/v1/assets/{asset_id}`; every `{param}` is an integer id. */
  path: string;
  operationId: string;
  summary: string;
  tag: string;
  /** Required scopes (all of them); `[]` means any valid API key. Undefined: no authentication. */
  scopes?: string[];
  /**
   * A console route (under /console/): authenticated by the web-session cookie instead of a bearer key,
   * its writes checked for CSRF; never under /api/v1, which keeps refusing session tokens.
   */
  session?: true;
  /** Left out of the OpenAPI document (the document itself, redirects, ops endpoints). */
  undocumented?: boolean;
  /** Also accepts a single-use stream ticket (`?ticket=`, events/tickets.ts) in place of the Authorization header. */
  ticketAuth?: boolean;
  /** False for routes that do not act on the org's data (no shard is resolved, e.g. /orgs/me). */
  orgScoped?: boolean;
  query?: QuerySpec;
  /** Path parameters kept as text, not judged as integer ids (the handler judges them). */
  textParams?: readonly string[];
  /**
   * The body is read as a stream (`ctx.upload`) of one of these media types, up to `maxBytes`,
   * instead of a JSON body held whole (`body`).
   */
  upload?: { contentTypes: readonly string[]; maxBytes: number; description: string; schema: TSchema };
  /**
   * The table whose row the path's one id names, when the 200 body depends on that row alone (no
   * clock, no scans, no query): it may be served from the shard's response cache until a write
   * changes the row (shard write effects name it) or any master data (effects `any`).
   */
  cacheable?: string;
  body?: {
    schema: TSchema;
    contentType: BodyContentType;
    /** Extra checks on a body that may still hold wrongly typed values; reported with the schema's failures. */
    check?: (body: Record<string, unknown>, now: number) => FieldError[];
    /**
     * Checks that need the organization's data (foreign keys, read-only echoes against the row). Called
     * only when the request already failed elsewhere, on the shard's reader, so that every failure is
     * reported together; `failed` holds the fields already reported. A valid request gets these checks
     * in its handler (inside the write command) instead.
     */
    resolve?: (
      body: Record<string, unknown>,
      scope: { shard: Shard; orgId: number; params: PathParams },
      failed: Set<string>,
    ) => FieldError[];
  };
  responses: Record<number, ResponseSpec>;
  handler: (ctx: RequestContext) => Reply | Promise<Reply>;
}
