import net from 'node:net';
import tls from 'node:tls';
import { RefusedAddress, type AddressPolicy } from './addresses.js';
import { type ParseResult, ResponseReader } from './response.js';

/** The first bytes of a response body kept in the delivery log. */
export const EXCERPT_BYTES = 1024;
/** A response body larger than this is cut off (the connection closed): the attempt fails. */
export const MAX_RESPONSE_BYTES = 64 * 1024;
/** An idle kept-alive connection is closed after this long (below the 5 s many servers keep one). */
const IDLE_MS = 4_000;

export interface SendOutcome {
  status: number | null;
  error: string | null;
  latencyMs: number;
  excerpt: string | null;
  /** Seconds (or an HTTP date) the receiver asked to wait (`Retry-After`), as given. */
  retryAfter: string | undefined;
}

type Outcome = Omit<SendOutcome, 'latencyMs'>;

interface Connection {
  socket: net.Socket;
  idleTimer?: NodeJS.Timeout;
}

/** Bytes on a connection with no request out: the receiver is not speaking HTTP as asked, the connection ends. */
const endOnIdleData = function (this: net.Socket) {
  this.destroy();
};

/**
 * POSTs one delivery with a deadline on the whole exchange (connect, answer, body), a bound on the
 * body read, no redirects followed (a 3xx is a failed attempt), and the receiver's address judged
 * by the policy (literal addresses here, names at connect time through the guarded lookup).
 *
 * HTTP/1.1 written and read here rather than by node:http: a request is one write of its bytes and
 * the answer is read by `ResponseReader`, which takes a round trip on loopback from about 4 times
 * the receiver's own work to about 1 (node:http's request and response objects, agent and streams
 * were most of a delivery's cost on the shard thread). Connections are kept alive per origin; a
 * kept one that closes before any byte of the answer (the receiver dropped it while idle) is
 * replaced by a new one for the same attempt.
 */
export class Sender {
  private readonly idle = new Map<string, Connection[]>();
  private readonly open = new Set<net.Socket>();
  private readonly lookup: net.LookupFunction;
  private readonly urls = new Map<string, URL>();

  constructor(
    private readonly policy: AddressPolicy,
    private readonly timeoutMs: number,
  ) {
    this.lookup = policy.guardedLookup();
  }

  send(target: string, headers: Record<string, string>, body: string): Promise<SendOutcome> {
    const started = performance.now();
    const done = (o: Outcome): SendOutcome => ({ ...o, latencyMs: Math.round(performance.now() - started) });
    const url = this.parse(target);
    if (url === undefined || (url.protocol !== 'http:' && url.protocol !== 'https:')) return Promise.resolve(done(failed('invalid URL')));
    const literal = bareHost(url);
    if (net.isIP(literal) !== 0) {
      const refusal = this.policy.refusal(literal);
      if (refusal !== undefined) return Promise.resolve(done(failed(`refused address: ${refusal}`)));
    }
    let head = `POST ${url.pathname}${url.search} HTTP/1.1\r\nhost: ${url.host}\r\n`;
    for (const name in headers) head += `${name}: ${headers[name]}\r\n`;
    const request = Buffer.from(
      `${head}content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: keep-alive\r\n\r\n${body}`,
    );
    const deadline = Date.now() + this.timeoutMs;
    return this.exchange(url, request, deadline, true).then(done);
  }

  private parse(target: string): URL | undefined {
    let url = this.urls.get(target);
    if (url === undefined) {
      try {
        url = new URL(target);
      } catch {
        return undefined;
      }
      if (this.urls.size >= 1000) this.urls.clear();
      this.urls.set(target, url);
    }
    return url;
  }

  /** One request on a kept connection (or a new one) and its answer; `again`: a kept one found closed may be replaced once. */
  private exchange(url: URL, request: Buffer, deadline: number, again: boolean): Promise<Outcome> {
    const kept = this.idle.get(url.origin)?.pop();
    const connection = kept ?? this.connect(url);
    clearTimeout(connection.idleTimer);
    const { socket } = connection;
    socket.off('data', endOnIdleData);
    return new Promise<Outcome>((resolve) => {
      const reader = new ResponseReader(MAX_RESPONSE_BYTES, EXCERPT_BYTES);
      let settled = false;
      const settle = (result: ParseResult | { error: string; retry?: boolean }) => {
        if (settled || result === undefined) return;
        settled = true;
        clearTimeout(timer);
        socket.off('data', onData);
        socket.off('end', onEnd);
        socket.off('close', onClose);
        socket.off('error', onError);
        if ('done' in result) {
          const r = result.done;
          if (r.reusable) this.keep(url.origin, connection);
          else socket.destroy();
          const text = r.excerpt.toString('utf8');
          resolve({ status: r.status, error: null, excerpt: text === '' ? null : text, retryAfter: r.headers.get('retry-after') });
          return;
        }
        socket.destroy();
        if ('retry' in result && result.retry === true) resolve(this.exchange(url, request, deadline, false));
        else resolve(failed(result.error));
      };
      // A kept connection that the receiver closed before answering: the request was not taken, try a new one.
      const replaceable = () => kept !== undefined && again && !reader.started;
      const onData = (chunk: Buffer) => settle(reader.push(chunk));
      const onEnd = () => settle(replaceable() ? { error: '', retry: true } : reader.end());
      const onClose = () => settle(replaceable() ? { error: '', retry: true } : reader.end());
      const onError = (err: Error & { code?: string }) => {
        if (err instanceof RefusedAddress) settle({ error: `refused address: ${err.message}` });
        else settle(replaceable() ? { error: '', retry: true } : { error: `connection error: ${err.code ?? err.message}` });
      };
      const timer = setTimeout(() => settle({ error: `timeout after ${this.timeoutMs} ms` }), Math.max(0, deadline - Date.now()));
      socket.on('data', onData);
      socket.on('end', onEnd);
      socket.on('close', onClose);
      socket.on('error', onError);
      socket.write(request);
    });
  }

  private connect(url: URL): Connection {
    const host = bareHost(url);
    const secure = url.protocol === 'https:';
    const port = url.port === '' ? (secure ? 443 : 80) : Number(url.port);
    const socket = secure
      ? tls.connect({ host, port, lookup: this.lookup, servername: net.isIP(host) === 0 ? host : undefined, ALPNProtocols: ['http/1.1'] })
      : net.connect({ host, port, lookup: this.lookup });
    socket.setNoDelay(true);
    this.open.add(socket);
    // Errors of an idle connection (a reset while kept) end it; an exchange listens for its own.
    socket.on('error', () => undefined);
    socket.once('close', () => {
      this.open.delete(socket);
      const list = this.idle.get(url.origin);
      const at = list?.findIndex((c) => c.socket === socket) ?? -1;
      if (at >= 0) list!.splice(at, 1);
    });
    return { socket };
  }

  private keep(origin: string, connection: Connection): void {
    let list = this.idle.get(origin);
    if (list === undefined) this.idle.set(origin, (list = []));
    list.push(connection);
    connection.socket.on('data', endOnIdleData);
    connection.idleTimer = setTimeout(() => connection.socket.destroy(), IDLE_MS);
    connection.idleTimer.unref();
  }

  close(): void {
    for (const socket of this.open) socket.destroy();
    this.open.clear();
    this.idle.clear();
  }
}

function failed(error: string): Outcome {
  return { status: null, error, excerpt: null, retryAfter: undefined };
}

function bareHost(url: URL): string {
  return url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
}
