/** A Server-Sent Events client over a real socket (node:http), for trackd's event streams. */
import http from 'node:http';
import type { EventView } from './events.js';
import type { Trackd } from './trackd.js';

export interface SseFrame {
  id?: string;
  event?: string;
  data: string;
}

export interface SseStream {
  status: number;
  headers: http.IncomingHttpHeaders;
  /** Event frames received so far (not comments, not the close frame). */
  events: EventView[];
  frames: SseFrame[];
  /** The close frame's data when the server ended the stream. */
  closedWith: { reason: string; resume_after: number } | undefined;
  /** Resolves when the response ends (server close or ours). */
  ended: Promise<void>;
  /** The body of a non-200 answer. */
  body: string;
  /** Waits until `n` events arrived (or fails after `ms`). */
  waitFor(n: number, ms?: number): Promise<EventView[]>;
  pause(): void;
  resume(): void;
  close(): void;
}

export function openStream(
  trackd: Trackd,
  options: { token?: string; query?: string; lastEventId?: string; headers?: Record<string, string> } = {},
): Promise<SseStream> {
  const headers: Record<string, string> = { accept: 'text/event-stream', ...options.headers };
  if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
  if (options.lastEventId !== undefined) headers['last-event-id'] = options.lastEventId;
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port: trackd.port, path: `/api/v1/events/stream${options.query ?? ''}`, headers });
    req.on('error', reject);
    req.on('response', (res) => {
      let buffer = '';
      let endedResolve: () => void;
      const ended = new Promise<void>((r) => {
        endedResolve = r;
      });
      const waiters: (() => void)[] = [];
      const stream: SseStream = {
        status: res.statusCode ?? 0,
        headers: res.headers,
        events: [],
        frames: [],
        closedWith: undefined,
        ended,
        body: '',
        waitFor(n, ms = 10_000) {
          return new Promise((ok, fail) => {
            const timer = setTimeout(() => fail(new Error(`waited ${ms} ms for ${n} events, got ${stream.events.length}`)), ms);
            const check = () => {
              if (stream.events.length >= n) {
                clearTimeout(timer);
                ok(stream.events.slice(0, n));
                return true;
              }
              return false;
            };
            const again = () => {
              if (!check()) waiters.push(again);
            };
            if (!check()) waiters.push(again);
          });
        },
        pause: () => res.pause(),
        resume: () => res.resume(),
        close: () => {
          req.destroy();
          endedResolve();
        },
      };
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        if (stream.status !== 200) {
          stream.body += chunk;
          return;
        }
        buffer += chunk;
        let cut = buffer.indexOf('\n\n');
        while (cut >= 0) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          cut = buffer.indexOf('\n\n');
          const frame: SseFrame = { data: '' };
          let comment = true;
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) continue;
            comment = false;
            const colon = line.indexOf(':');
            const field = line.slice(0, colon);
            const value = line.slice(colon + 1).replace(/^ /, '');
            if (field === 'id') frame.id = value;
            else if (field === 'event') frame.event = value;
            else if (field === 'data') frame.data += value;
          }
          if (comment) continue;
          stream.frames.push(frame);
          if (frame.event === 'close') stream.closedWith = JSON.parse(frame.data);
          else stream.events.push(JSON.parse(frame.data) as EventView);
        }
        for (const w of waiters.splice(0)) w();
      });
      res.on('end', () => endedResolve());
      res.on('close', () => endedResolve());
      resolve(stream);
    });
  });
}
