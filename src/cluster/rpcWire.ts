/**
 * The messages of shard RPC (docs/cluster.md, "Any node answers"): a request the front node
 * authenticated, handed whole to the node that owns the org's shard, and that node's answer. Each
 * is one NATS message: a 4-byte length, a JSON head, then the body's bytes as they are (a 1 MiB
 * body is not escaped into JSON).
 */

/** What the owner needs to run the request through its own pipeline. */
export interface ForwardedRequest {
  method: string;
  /** Path with its query string, as on the request line. */
  url: string;
  /** Lower-cased names: the headers the pipeline reads. */
  headers: Record<string, string>;
  remoteAddress: string;
  body: Buffer | undefined;
  /** An upload's body staged in the object store under this name (cluster/uploads.ts) instead of `body`. */
  staged?: string;
}

/** The owner's answer: status, the headers its handler set, the body (absent: none was written). */
export interface ForwardedAnswer {
  status: number;
  headers: Record<string, string>;
  contentType: string | undefined;
  body: string | undefined;
  /** The node did not own the shard when the request came (a lease moved): nothing was run. */
  notOwner?: true;
  /** A body over the broker's max_payload (a large export) staged in the object store under this name instead of `body`. */
  staged?: string;
  /** On the owner only, never sent: a streamed answer's pieces as its handler writes them (the RPC server stages them). */
  stream?: AsyncIterable<Buffer>;
}

interface RequestHead {
  m: string;
  u: string;
  h: Record<string, string>;
  r: string;
  b: boolean;
  s?: string;
}

interface AnswerHead {
  s: number;
  h: Record<string, string>;
  c?: string;
  b: boolean;
  n?: true;
  st?: string;
}

function frame(head: unknown, body: Buffer | undefined): Uint8Array {
  const headBytes = Buffer.from(JSON.stringify(head));
  const out = Buffer.allocUnsafe(4 + headBytes.length + (body?.length ?? 0));
  out.writeUInt32BE(headBytes.length, 0);
  headBytes.copy(out, 4);
  body?.copy(out, 4 + headBytes.length);
  return out;
}

function unframe<T>(data: Uint8Array): { head: T; body: Buffer } {
  const bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  if (bytes.length < 4) throw new Error('shard RPC message shorter than its frame');
  const headLength = bytes.readUInt32BE(0);
  if (4 + headLength > bytes.length) throw new Error('shard RPC message head runs past its end');
  const head = JSON.parse(bytes.subarray(4, 4 + headLength).toString('utf8')) as T;
  return { head, body: bytes.subarray(4 + headLength) };
}

export function encodeRequest(request: ForwardedRequest): Uint8Array {
  const head: RequestHead = {
    m: request.method,
    u: request.url,
    h: request.headers,
    r: request.remoteAddress,
    b: request.body !== undefined,
  };
  if (request.staged !== undefined) head.s = request.staged;
  return frame(head, request.body);
}

export function decodeRequest(data: Uint8Array): ForwardedRequest {
  const { head, body } = unframe<RequestHead>(data);
  if (typeof head.m !== 'string' || typeof head.u !== 'string' || typeof head.h !== 'object' || head.h === null)
    throw new Error('shard RPC request without method, url or headers');
  return {
    method: head.m,
    url: head.u,
    headers: head.h,
    remoteAddress: String(head.r ?? ''),
    body: head.b ? Buffer.from(body) : undefined,
    ...(typeof head.s === 'string' ? { staged: head.s } : {}),
  };
}

export function encodeAnswer(answer: ForwardedAnswer): Uint8Array {
  const head: AnswerHead = { s: answer.status, h: answer.headers, c: answer.contentType, b: answer.body !== undefined };
  if (answer.notOwner) head.n = true;
  if (answer.staged !== undefined) head.st = answer.staged;
  return frame(head, answer.body === undefined ? undefined : Buffer.from(answer.body, 'utf8'));
}

export function decodeAnswer(data: Uint8Array): ForwardedAnswer {
  const { head, body } = unframe<AnswerHead>(data);
  if (typeof head.s !== 'number') throw new Error('shard RPC answer without a status');
  return {
    status: head.s,
    headers: head.h ?? {},
    contentType: head.c,
    body: head.b ? body.toString('utf8') : undefined,
    ...(head.n ? { notOwner: true as const } : {}),
    ...(typeof head.st === 'string' ? { staged: head.st } : {}),
  };
}

export const rpcSubject = (shard: number) => `trackd.shard.${shard}.rpc`;
