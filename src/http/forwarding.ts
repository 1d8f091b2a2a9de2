/**
 * The HTTP side of shard RPC (docs/cluster.md, "Any node answers"): which request headers travel
 * to the owner, and how an answer comes back as a Reply (and the owner's injected response goes
 * out as an answer).
 */
import type uWS from 'uWebSockets.js';
import type { ForwardedAnswer, ForwardedRequest } from '../cluster/rpcWire.js';
import type { StagedUploads } from '../cluster/uploads.js';
import type { InjectedResponse } from './inject.js';
import type { Reply } from './route.js';

/** How the HTTP server reaches the shards of other nodes (cluster mode). */
export interface ShardForwarding {
  /** Whether this node serves the shard itself. */
  isLocal(shard: number): boolean;
  /** The owner's answer to the request, or throws the ApiError (503) of a failover. */
  forward(shard: number, request: ForwardedRequest, isRead: boolean, answerTimeoutMs?: number): Promise<ForwardedAnswer>;
  /** Where uploads to other nodes' shards are staged, and where an owner reads a forwarded upload's body. */
  uploads: StagedUploads;
}

/** Every request header the pipeline reads (server.ts onRequest); the request id is set apart. */
const FORWARDED_HEADERS = [
  'authorization',
  'x-api-key',
  'content-type',
  'accept',
  'idempotency-key',
  'cookie',
  'origin',
  'host',
  'x-csrf-token',
  'sec-fetch-site',
  'x-forwarded-proto',
] as const;

/** Copies the headers to forward out of `req` (valid only during the uWS handler call). */
export function forwardedHeaders(req: uWS.HttpRequest): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const name of FORWARDED_HEADERS) {
    const value = req.getHeader(name);
    if (value !== '') headers[name] = value;
  }
  return headers;
}

/** Headers the front node writes itself (its own exchange's) or that describe the owner's injected exchange. */
const OWN_HEADERS = new Set(['content-length', 'content-type', 'uwebsockets', 'x-request-id', 'keep-alive']);

/** The owner's injected response as an answer: the handler's headers, without the exchange's own. */
export function answerOf(response: InjectedResponse): ForwardedAnswer {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(response.headers))
    if (!OWN_HEADERS.has(name) && !name.startsWith('x-ratelimit-')) headers[name] = value;
  const contentType = response.headers['content-type'];
  const body = contentType === undefined ? undefined : response.body;
  return response.stream === undefined
    ? { status: response.status, headers, contentType, body }
    : { status: response.status, headers, contentType, body, stream: response.stream };
}

/** The answer as the front node's reply (it adds its own request id, rate-limit and keep-alive headers). */
export function replyOf(answer: ForwardedAnswer): Reply {
  return { status: answer.status, headers: answer.headers, text: answer.body, contentType: answer.contentType };
}
