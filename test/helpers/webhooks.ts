/** A webhook receiver on loopback for tests and the bench: records every request, answers as told. */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Teardown, Trackd } from './trackd.js';
import { INTEGRATOR_SCOPES } from '../../src/auth/tokens.js';

export interface Received {
  headers: http.IncomingHttpHeaders;
  body: string;
  json: any;
  /** Arrival time (epoch ms). */
  at: number;
}

export interface Answer {
  status: number;
  headers?: Record<string, string>;
  body?: string;
}

export interface Receiver {
  url: string;
  port: number;
  received: Received[];
  /** How the next requests are answered (default 200 `ok`). */
  answer: (request: Received) => Answer;
  /** Stops listening (connections refused) until `start` again on the same port. */
  stop(): Promise<void>;
  start(): Promise<void>;
}

export async function startReceiver(t: Teardown, port = 0): Promise<Receiver> {
  const receiver: Receiver = {
    url: '',
    port,
    received: [],
    answer: () => ({ status: 200, body: 'ok' }),
    stop: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
    start: () => new Promise<void>((resolve) => server.listen(receiver.port, '127.0.0.1', () => resolve())),
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      let json: unknown;
      try {
        json = JSON.parse(body);
      } catch {
        json = undefined;
      }
      const request: Received = { headers: req.headers, body, json, at: Date.now() };
      receiver.received.push(request);
      const answer = receiver.answer(request);
      res.writeHead(answer.status, answer.headers ?? {});
      res.end(answer.body ?? '');
    });
  });
  server.keepAliveTimeout = 4000;
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', () => resolve()));
  receiver.port = (server.address() as AddressInfo).port;
  receiver.url = `http://127.0.0.1:${receiver.port}/hook`;
  t.teardown(() => receiver.stop());
  return receiver;
}

/** Creates a webhook; returns the endpoint with its secret. */
export async function createWebhook(trackd: Trackd, token: string, body: Record<string, unknown>): Promise<any> {
  const res = await trackd.request('POST', '/api/v1/webhooks', { token, body });
  if (res.status !== 201) throw new Error(`create webhook: ${res.status} ${res.text}`);
  return res.json.data;
}

/** The endpoint's delivery log, newest first (every page). */
export async function deliveries(trackd: Trackd, token: string, id: number): Promise<any[]> {
  const res = await trackd.request('GET', `/api/v1/webhooks/${id}/deliveries?limit=200`, { token });
  if (res.status !== 200) throw new Error(`deliveries: ${res.status} ${res.text}`);
  return res.json.data;
}

/** Every scope a key can hold: the interface's five and the webhook scopes. */
export const WEBHOOK_SCOPES = [...INTEGRATOR_SCOPES];
/** Retries compressed for tests: 20 ms doubling to 200 ms. */
export const FAST_RETRIES = { WEBHOOK_ALLOWED_CIDRS: '127.0.0.1/32', WEBHOOK_RETRY_FIRST_MS: '20', WEBHOOK_RETRY_MAX_MS: '200' };
