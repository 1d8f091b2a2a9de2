import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Reply, Route } from '../http/route.js';

/** The built console (npm run build: esbuild bundles console/src into dist/console). */
const BUILT = fileURLToPath(new URL('../../console/', import.meta.url));

/**
 * Nothing but this server's own files: no inline script or style, no third-party origin, no frames.
 * connect-src 'self' also covers the live feed's same-origin WebSocket.
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

export const CONSOLE_HEADERS: Record<string, string> = {
  'Content-Security-Policy': CONSOLE_CSP,
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'Cache-Control': 'no-store',
  'X-Frame-Options': 'DENY',
};

const FILES: [string, string, string][] = [
  ['/console', 'index.html', 'text/html; charset=utf-8'],
  ['/console/', 'index.html', 'text/html; charset=utf-8'],
  ['/console/app.js', 'app.js', 'text/javascript; charset=utf-8'],
  ['/console/app.css', 'app.css', 'text/css; charset=utf-8'],
];

function fileReply(name: string, contentType: string): () => Reply {
  let text: string | undefined;
  return () => {
    try {
      text ??= fs.readFileSync(BUILT + name, 'utf8');
    } catch {
      return {
        status: 503,
        contentType: 'text/plain; charset=utf-8',
        text: 'The console is not built: run `npm run build`.\n',
        headers: CONSOLE_HEADERS,
      };
    }
    return { status: 200, text, contentType, headers: CONSOLE_HEADERS };
  };
}

export function staticRoutes(): Route[] {
  return FILES.map(([path, name, contentType]) => ({
    method: 'GET',
    path,
    operationId: `console:${name}`,
    summary: `The console's ${name}`,
    tag: 'Console',
    undocumented: true,
    orgScoped: false,
    responses: { 200: { description: name } },
    handler: fileReply(name, contentType),
  }));
}
