import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { RefusedAddress, type AddressPolicy } from './addresses.js';

/** The first bytes of a response body kept in the delivery log. */
export const EXCERPT_BYTES = 1024;
/** A response body larger than this is cut off (the connection closed): the attempt fails. */
export const MAX_RESPONSE_BYTES = 64 * 1024;

export interface SendOutcome {
  status: number | null;
  error: string | null;
  latencyMs: number;
  excerpt: string | null;
  /** Seconds (or an HTTP date) the receiver asked to wait (`Retry-After`), as given. */
  retryAfter: string | undefined;
}

/**
 * POSTs one delivery with a deadline on the whole exchange (connect, answer, body), a bound on the
 * body read, no redirects followed (a 3xx is a failed attempt), and the receiver's address judged
 * by the policy (literal addresses here, names at connect time through the guarded lookup).
 * Connections are kept alive per origin through `agents`.
 */
export class Sender {
  private readonly agents = new Map<string, http.Agent>();

  constructor(
    private readonly policy: AddressPolicy,
    private readonly timeoutMs: number,
  ) {}

  private agentFor(url: URL): http.Agent {
    let agent = this.agents.get(url.origin);
    if (agent === undefined) {
      const options = { keepAlive: true, maxSockets: 4, lookup: this.policy.guardedLookup() };
      agent = url.protocol === 'https:' ? new https.Agent(options) : new http.Agent(options);
      this.agents.set(url.origin, agent);
    }
    return agent;
  }

  send(target: string, headers: Record<string, string>, body: string): Promise<SendOutcome> {
    const started = performance.now();
    const done = (o: Omit<SendOutcome, 'latencyMs'>): SendOutcome => ({ ...o, latencyMs: Math.round(performance.now() - started) });
    const failed = (error: string) => done({ status: null, error, excerpt: null, retryAfter: undefined });
    let url: URL;
    try {
      url = new URL(target);
    } catch {
      return Promise.resolve(failed('invalid URL'));
    }
    const literal = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    if (net.isIP(literal) !== 0) {
      const refusal = this.policy.refusal(literal);
      if (refusal !== undefined) return Promise.resolve(failed(`refused address: ${refusal}`));
    }
    return new Promise<SendOutcome>((resolve) => {
      let settled = false;
      const finish = (outcome: SendOutcome) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(outcome);
      };
      const request = (url.protocol === 'https:' ? https : http).request(url, {
        method: 'POST',
        agent: this.agentFor(url),
        headers: { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) },
      });
      const timer = setTimeout(() => {
        request.destroy();
        finish(failed(`timeout after ${this.timeoutMs} ms`));
      }, this.timeoutMs);
      request.on('error', (err: Error & { code?: string }) => {
        finish(failed(err instanceof RefusedAddress ? `refused address: ${err.message}` : `connection error: ${err.code ?? err.message}`));
      });
      request.on('response', (response) => {
        const chunks: Buffer[] = [];
        let size = 0;
        response.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_RESPONSE_BYTES) {
            response.destroy();
            request.destroy();
            finish(failed(`response larger than ${MAX_RESPONSE_BYTES} bytes`));
            return;
          }
          if (size - chunk.length < EXCERPT_BYTES) chunks.push(chunk);
        });
        response.on('error', () => finish(failed('connection error: response cut off')));
        response.on('end', () => {
          const text = Buffer.concat(chunks).subarray(0, EXCERPT_BYTES).toString('utf8');
          const retryAfter = response.headers['retry-after'];
          finish(done({ status: response.statusCode ?? 0, error: null, excerpt: text === '' ? null : text, retryAfter }));
        });
      });
      request.end(body);
    });
  }

  close(): void {
    for (const agent of this.agents.values()) agent.destroy();
    this.agents.clear();
  }
}
