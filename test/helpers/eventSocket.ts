/** A client of trackd's events WebSocket (`ws`, a real socket): subscriptions, their events, the close. */
import WebSocket from 'ws';
import type { EventView } from './events.js';
import type { Trackd } from './trackd.js';

export interface SocketMessage {
  op: string;
  id?: string | null;
  event?: EventView;
  error?: { type: string; detail: string; fields?: { field: string; code: string }[] };
  [key: string]: unknown;
}

export interface EventSocket {
  ws: WebSocket;
  /** Every message received, in order. */
  messages: SocketMessage[];
  /** The events of subscription `id`, in order. */
  events(id: string): EventView[];
  /** Waits until `n` events of subscription `id` arrived. */
  waitFor(id: string, n: number, ms?: number): Promise<EventView[]>;
  /** Waits for the next message with this op (and id) not yet taken by an earlier wait. */
  next(op: string, id?: string, ms?: number): Promise<SocketMessage>;
  send(message: unknown): void;
  /** Resolves with the close code and reason. */
  closed: Promise<{ code: number; reason: string }>;
  close(): Promise<void>;
}

/** The refusal of an upgrade: its status and error envelope. */
export interface Refused {
  status: number;
  body: string;
}

export function openSocket(trackd: Trackd, options: { token?: string; query?: string } = {}): Promise<EventSocket | Refused> {
  const headers: Record<string, string> = {};
  if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
  const ws = new WebSocket(`ws://127.0.0.1:${trackd.port}/api/v1/events/ws${options.query ?? ''}`, { headers });
  return new Promise((resolve, reject) => {
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        body += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    ws.once('error', reject);
    ws.once('open', () => {
      const messages: SocketMessage[] = [];
      const taken = new Set<SocketMessage>();
      const waiters: (() => void)[] = [];
      const closed = new Promise<{ code: number; reason: string }>((done) => {
        ws.once('close', (code, reason) => {
          done({ code, reason: reason.toString() });
          for (const w of waiters.splice(0)) w();
        });
      });
      ws.on('message', (data) => {
        messages.push(JSON.parse(data.toString()) as SocketMessage);
        for (const w of waiters.splice(0)) w();
      });
      const until = <T>(found: () => T | undefined, what: string, ms: number): Promise<T> =>
        new Promise((ok, fail) => {
          const timer = setTimeout(() => fail(new Error(`waited ${ms} ms for ${what}`)), ms);
          const check = () => {
            const value = found();
            if (value !== undefined) {
              clearTimeout(timer);
              ok(value);
            } else waiters.push(check);
          };
          check();
        });
      const socket: EventSocket = {
        ws,
        messages,
        events: (id) => messages.filter((m) => m.op === 'event' && m.id === id).map((m) => m.event!),
        waitFor: (id, n, ms = 10_000) =>
          until(
            () => {
              const got = socket.events(id);
              return got.length >= n ? got.slice(0, n) : undefined;
            },
            `${n} events of ${id}`,
            ms,
          ),
        next: (op, id, ms = 10_000) =>
          until(
            () => {
              const m = messages.find((m) => !taken.has(m) && m.op === op && (id === undefined || m.id === id));
              if (m !== undefined) taken.add(m);
              return m;
            },
            `a ${op} message`,
            ms,
          ),
        send: (message) => ws.send(JSON.stringify(message)),
        closed,
        close: async () => {
          ws.close();
          await closed;
        },
      };
      resolve(socket);
    });
  });
}

export const isRefused = (s: EventSocket | Refused): s is Refused => 'status' in s;

/** Opens a socket that must open. */
export async function mustOpen(trackd: Trackd, options: { token?: string; query?: string } = {}): Promise<EventSocket> {
  const s = await openSocket(trackd, options);
  if (isRefused(s)) throw new Error(`the socket was refused: ${s.status} ${s.body}`);
  return s;
}
