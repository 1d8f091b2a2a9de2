import { STATUS_CODES } from 'node:http';
import type uWS from 'uWebSockets.js';
import { Authenticator, type Principal } from '../auth/authenticator.js';
import { ApiError, fieldError, type FieldError } from '../errors/catalog.js';
import { asApiError, errorEnvelope } from '../errors/envelope.js';
import { parseQuery } from '../http/query.js';
import type { ShardRegistry } from '../shards/registry.js';
import type { Shard } from '../shards/shard.js';
import { type EventRow, envelopeJson } from './envelope.js';
import { compileFilter, shardSubtrees } from './filters.js';
import type { CloseReason, EventHub, StreamSink } from './hub.js';
import { eventsAfter, lastSeq } from './read.js';
import { eventScopes } from './routes.js';
import { ticketPrincipal } from './tickets.js';
import { EVENT_TYPES } from './types.js';

/** The path of the events WebSocket (docs/events-websocket.md has the protocol). */
export const EVENTS_WS_PATH = '/api/v1/events/ws';

/**
 * A request on the socket's path that uWS did not upgrade (no Upgrade, or no valid Sec-WebSocket-Key):
 * a GET is told to upgrade (426 with `Upgrade: websocket`, RFC 9110 15.5.22), another method is 405.
 */
export function notAnUpgrade(method: string): ApiError {
  if (method === 'GET' || method === 'HEAD')
    return new ApiError('upgrade_required', `${EVENTS_WS_PATH} is a WebSocket: send GET with Upgrade: websocket`, {
      headers: { Upgrade: 'websocket' },
    });
  return new ApiError('method_not_allowed', `Method ${method} is not allowed; allowed methods: GET (a WebSocket upgrade)`, {
    headers: { Allow: 'GET' },
  });
}

/** Subscriptions one socket may hold at once. */
export const MAX_SUBSCRIPTIONS = 16;

/** An event is at most one request body's worth of data (1 MiB, the API's body limit) and its envelope. */
const LARGEST_EVENT_BYTES = 1024 * 1024 + 64 * 1024;

/** Close codes of the socket, by reason (documented; `cursor_expired` ends one subscription, not the socket). */
export const CLOSE_CODES: Record<Exclude<CloseReason, 'cursor_expired'>, number> = {
  shutdown: 1001,
  unauthorized: 4001,
  slow_consumer: 4002,
};

/** What a socket carries from its upgrade to its close. */
interface SocketState {
  principal: Principal;
  shard: Shard;
  /** Open subscriptions by the client's id: what detaches each from the hub. */
  subscriptions: Map<string, () => void>;
  /** uWS holds back what was sent: nothing more until it drains. */
  blocked: boolean;
  waiting: (() => void)[];
  closed: boolean;
}

type Socket = uWS.WebSocket<SocketState>;

/**
 * An event message of subscription `id` as bytes. A poll hands the same row objects to every
 * subscription of the org, and clients tend to name their subscriptions alike: the message made for
 * the last id asked is kept with the row, so the sockets of the same id share it (each send copies
 * bytes instead of encoding text).
 */
function eventMessage(id: string, row: EventRow): Uint8Array {
  const kept = messages.get(row);
  if (kept !== undefined && kept.id === id) return kept.bytes;
  const bytes = Buffer.from(`{"op":"event","id":${JSON.stringify(id)},"event":${envelopeJson(row)}}`);
  messages.set(row, { id, bytes });
  return bytes;
}

const messages = new WeakMap<EventRow, { id: string; bytes: Uint8Array }>();

interface Deps {
  hub: EventHub;
  authenticator: Authenticator;
  shards: ShardRegistry;
  now: () => number;
  /** Past this many buffered bytes a socket counts as not keeping up (its subscriptions wait). */
  highWaterBytes: number;
}

const SUBSCRIBE_KEYS = new Set(['op', 'id', 'after', 'types', 'asset_ids', 'location_id']);
const isId = (v: unknown): v is number => Number.isInteger(v) && (v as number) >= 1 && (v as number) <= 2147483647;

/** The fields of a subscribe message that are wrong (empty: it is good). */
function subscribeErrors(m: Record<string, unknown>): FieldError[] {
  const errors: FieldError[] = [];
  for (const key of Object.keys(m))
    if (!SUBSCRIBE_KEYS.has(key)) errors.push(fieldError(key, 'unknown_field', `${key} is not a subscribe field`));
  if (m.after !== undefined && !(Number.isSafeInteger(m.after) && (m.after as number) >= 0))
    errors.push(fieldError('after', 'invalid_value', 'after must be a sequence (an integer >= 0)'));
  if (m.types !== undefined && !(Array.isArray(m.types) && m.types.every((t) => (EVENT_TYPES as readonly string[]).includes(t as string))))
    errors.push(fieldError('types', 'invalid_value', `types must be a list of: ${EVENT_TYPES.join(', ')}`));
  if (m.asset_ids !== undefined && !(Array.isArray(m.asset_ids) && m.asset_ids.every(isId)))
    errors.push(fieldError('asset_ids', 'invalid_value', 'asset_ids must be a list of ids'));
  if (m.location_id !== undefined && !isId(m.location_id))
    errors.push(fieldError('location_id', 'invalid_value', 'location_id must be an id'));
  return errors;
}

/**
 * The events WebSocket: authenticated at the upgrade (Authorization header, or a single-use ticket in
 * `?ticket=`; never a key in the URL), then any number (up to MAX_SUBSCRIPTIONS) of filtered
 * subscriptions, each a cursor of the thread's hub like an SSE stream. The socket's send buffer is
 * shared: when uWS holds bytes back every subscription waits for the drain; one that waits too long
 * or falls too far behind closes the socket (slow_consumer) and each subscription resumes after the
 * last event the client got for it.
 */
export function eventSocket(deps: Deps): uWS.WebSocketBehavior<SocketState> {
  const send = (ws: Socket, text: string | Uint8Array): boolean => {
    if (ws.getUserData().closed) return true;
    return ws.send(text) === 1 && ws.getBufferedAmount() < deps.highWaterBytes;
  };
  const reply = (ws: Socket, message: Record<string, unknown>) => {
    const state = ws.getUserData();
    if (!state.closed) ws.send(JSON.stringify(message));
  };
  const fail = (ws: Socket, id: unknown, err: unknown) =>
    reply(ws, { op: 'error', id: typeof id === 'string' ? id : null, ...errorEnvelope(asApiError(err), EVENTS_WS_PATH, '') });

  const sinkOf = (ws: Socket, id: string): StreamSink => {
    const state = ws.getUserData();
    const write = (text: string | Uint8Array) => {
      if (state.closed) return true;
      // Sent even while another subscription holds the socket blocked: the hub has moved this
      // subscription's cursor past the event, so holding it back would skip it. Each subscription
      // stops at its first false, so at most one event each goes beyond the mark (within maxBackpressure).
      const ok = send(ws, text) && !state.blocked;
      if (!ok) state.blocked = true;
      return ok;
    };
    return {
      event: (row) => write(eventMessage(id, row)),
      // uWS pings the socket itself.
      keepAlive: () => !state.blocked,
      cork: (writes) => {
        if (state.closed) writes();
        else ws.cork(writes);
      },
      end: (reason, resumeAfter) => {
        if (state.closed) return;
        if (reason === 'cursor_expired') {
          state.subscriptions.delete(id);
          reply(ws, { op: 'closed', id, reason, resume_after: resumeAfter });
          return;
        }
        ws.end(CLOSE_CODES[reason], reason);
      },
      onWritable: (resume) => {
        state.waiting.push(resume);
      },
    };
  };

  const subscribe = (ws: Socket, m: Record<string, unknown>) => {
    const state = ws.getUserData();
    const id = m.id;
    if (typeof id !== 'string' || !/^[A-Za-z0-9._-]{1,64}$/.test(id))
      throw new ApiError('validation_error', 'id must be 1 to 64 letters, digits, ".", "_" or "-"', {
        fields: [fieldError('id', 'invalid_value', 'id must be 1 to 64 letters, digits, ".", "_" or "-"')],
      });
    const errors = subscribeErrors(m);
    if (errors.length > 0) throw new ApiError('validation_error', errors[0]!.message, { fields: errors });
    if (state.subscriptions.has(id))
      throw new ApiError('conflict', `subscription ${id} is open already: unsubscribe it first, or use another id`);
    if (state.subscriptions.size >= MAX_SUBSCRIPTIONS)
      throw new ApiError('conflict', `a socket holds at most ${MAX_SUBSCRIPTIONS} subscriptions`);
    const { orgId } = state.principal;
    const cursor = (m.after as number | undefined) ?? lastSeq(state.shard, orgId);
    // A position already past retention is refused (cursor_expired, naming the oldest held).
    eventsAfter(state.shard, orgId, cursor, 1);
    const filter = compileFilter(
      {
        types: m.types as string[] | undefined,
        assetIds: m.asset_ids as number[] | undefined,
        locationId: m.location_id as number | undefined,
      },
      shardSubtrees(state.shard, orgId),
    );
    reply(ws, { op: 'subscribed', id, after: cursor });
    state.subscriptions.set(id, deps.hub.add(state.shard, state.principal, filter, cursor, sinkOf(ws, id)));
  };

  const unsubscribe = (ws: Socket, m: Record<string, unknown>) => {
    const state = ws.getUserData();
    const detach = state.subscriptions.get(m.id as string);
    if (detach === undefined) throw new ApiError('not_found', `no open subscription ${String(m.id)}`);
    detach();
    state.subscriptions.delete(m.id as string);
    reply(ws, { op: 'unsubscribed', id: m.id });
  };

  return {
    maxPayloadLength: 16 * 1024,
    idleTimeout: 60,
    sendPingsAutomatically: true,
    // Above the high-water mark room for one event of each subscription (each stops at the mark and
    // waits, after the event that crossed it): a send is never dropped.
    maxBackpressure: deps.highWaterBytes + MAX_SUBSCRIPTIONS * LARGEST_EVENT_BYTES,
    upgrade: (res, req, context) => {
      const key = req.getHeader('sec-websocket-key');
      const protocol = req.getHeader('sec-websocket-protocol');
      const extensions = req.getHeader('sec-websocket-extensions');
      const authorization = req.getHeader('authorization');
      const hasApiKeyHeader = req.getHeader('x-api-key') !== '';
      const rawQuery = req.getQuery() ?? '';
      let aborted = false;
      res.onAborted(() => {
        aborted = true;
      });
      void (async () => {
        let state: SocketState;
        try {
          const errors: FieldError[] = [];
          parseQuery(rawQuery, { ticket: { kind: 'token' } }, errors);
          if (errors.length > 0) throw new ApiError('validation_error', errors[0]!.message, { fields: errors });
          const principal =
            authorization === '' && !hasApiKeyHeader
              ? await ticketPrincipal(deps.shards, rawQuery)
              : await deps.authenticator.verify(Authenticator.bearerToken(authorization, hasApiKeyHeader));
          eventScopes(principal.scopes);
          const shard = await deps.shards.forOrg(principal.orgId);
          if (shard === undefined) throw new ApiError('unauthorized', 'Invalid or expired token');
          state = { principal, shard, subscriptions: new Map(), blocked: false, waiting: [], closed: false };
        } catch (err) {
          if (aborted) return;
          const apiError = asApiError(err);
          res.cork(() => {
            res.writeStatus(`${apiError.status} ${STATUS_CODES[apiError.status]}`);
            res.writeHeader('Content-Type', 'application/json');
            res.end(JSON.stringify(errorEnvelope(apiError, EVENTS_WS_PATH, '')));
          });
          return;
        }
        if (aborted) return;
        res.cork(() => res.upgrade(state, key, protocol, extensions, context));
      })();
    },
    message: (ws, data) => {
      let m: Record<string, unknown>;
      try {
        const parsed: unknown = JSON.parse(Buffer.from(data).toString('utf8'));
        if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('not an object');
        m = parsed as Record<string, unknown>;
      } catch {
        fail(ws, undefined, new ApiError('validation_error', 'A message must be a JSON object'));
        return;
      }
      try {
        if (!deps.authenticator.valid(ws.getUserData().principal, deps.now())) return;
        if (m.op === 'subscribe') subscribe(ws, m);
        else if (m.op === 'unsubscribe') unsubscribe(ws, m);
        else
          throw new ApiError('validation_error', 'op must be subscribe or unsubscribe', {
            fields: [fieldError('op', 'invalid_value', 'op must be subscribe or unsubscribe')],
          });
      } catch (err) {
        fail(ws, m.id, err);
      }
    },
    drain: (ws) => {
      const state = ws.getUserData();
      if (ws.getBufferedAmount() >= deps.highWaterBytes) return;
      state.blocked = false;
      for (const resume of state.waiting.splice(0)) resume();
    },
    close: (ws) => {
      const state = ws.getUserData();
      state.closed = true;
      for (const detach of state.subscriptions.values()) detach();
      state.subscriptions.clear();
    },
  };
}
