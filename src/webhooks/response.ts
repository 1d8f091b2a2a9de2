/**
 * An HTTP/1.1 response read incrementally from a socket's chunks (RFC 9112): the status line and
 * headers, interim 1xx responses skipped, then the body by Content-Length, chunked coding, or up
 * to the close; only the first `excerptBytes` of the body are kept, and a body beyond `maxBody`
 * bytes is an error. Whatever follows the response on the connection makes it unfit for reuse.
 */

/** Bytes of status line and headers accepted before the response is judged malformed. */
const MAX_HEAD_BYTES = 64 * 1024;

export interface ParsedResponse {
  status: number;
  headers: Map<string, string>;
  /** The body's first bytes (at most the excerpt size). */
  excerpt: Buffer;
  /** Whether the connection may carry the next request. */
  reusable: boolean;
}

export type ParseResult = { done: ParsedResponse } | { error: string } | undefined;

type BodyMode = { kind: 'none' } | { kind: 'length'; left: number } | { kind: 'chunked' } | { kind: 'close' };

export class ResponseReader {
  private pending: Buffer = Buffer.alloc(0);
  private status = 0;
  private headers = new Map<string, string>();
  private body: BodyMode | undefined;
  private keepAlive = false;
  private received = 0;
  private bodyBytes = 0;
  private readonly kept: Buffer[] = [];
  private keptBytes = 0;
  /** Chunked coding: bytes left of the current chunk (then its CRLF), or the size line / trailers to read. */
  private chunk: { phase: 'size' } | { phase: 'data'; left: number } | { phase: 'crlf' } | { phase: 'trailers' } = { phase: 'size' };

  constructor(
    private readonly maxBody: number,
    private readonly excerptBytes: number,
  ) {}

  /** Whether any byte of a response arrived (a reused connection closed before one is safe to try again). */
  get started(): boolean {
    return this.received > 0;
  }

  /** Takes the next bytes; the response when complete, an error, or undefined for more. */
  push(data: Buffer): ParseResult {
    this.received += data.length;
    this.pending = this.pending.length === 0 ? data : Buffer.concat([this.pending, data]);
    for (;;) {
      if (this.body === undefined) {
        const end = this.pending.indexOf('\r\n\r\n');
        if (end < 0) return this.pending.length > MAX_HEAD_BYTES ? { error: 'connection error: malformed response' } : undefined;
        const problem = this.head(this.pending.subarray(0, end).toString('latin1'));
        this.pending = this.pending.subarray(end + 4);
        if (problem !== undefined) return { error: problem };
        if (this.body === undefined) continue; // an interim 1xx: the final response follows
      }
      return this.bodyStep();
    }
  }

  /** The connection ended: complete when the body runs to the close, else cut off. */
  end(): ParseResult {
    if (this.body?.kind === 'close') return this.finish(false);
    return { error: 'connection error: response cut off' };
  }

  private head(text: string): string | undefined {
    const lines = text.split('\r\n');
    const statusLine = /^HTTP\/1\.([01]) (\d{3})(?: |$)/.exec(lines[0] ?? '');
    if (statusLine === null) return 'connection error: malformed response';
    const status = Number(statusLine[2]);
    const headers = new Map<string, string>();
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(':');
      if (colon <= 0) return 'connection error: malformed response';
      const name = line.slice(0, colon).trim().toLowerCase();
      const value = line.slice(colon + 1).trim();
      const before = headers.get(name);
      headers.set(name, before === undefined ? value : `${before}, ${value}`);
    }
    if (status >= 100 && status < 200 && status !== 101) return undefined;
    this.status = status;
    this.headers = headers;
    const tokens = (name: string) =>
      (headers.get(name) ?? '')
        .toLowerCase()
        .split(',')
        .map((s) => s.trim());
    this.keepAlive = statusLine[1] === '1' && !tokens('connection').includes('close') && status !== 101;
    const coding = headers.get('transfer-encoding');
    const length = headers.get('content-length');
    if (status === 204 || status === 304) this.body = { kind: 'none' };
    else if (coding !== undefined) this.body = tokens('transfer-encoding').at(-1) === 'chunked' ? { kind: 'chunked' } : { kind: 'close' };
    else if (length !== undefined) {
      if (!/^\d{1,15}$/.test(length)) return 'connection error: malformed response';
      this.body = { kind: 'length', left: Number(length) };
    } else this.body = { kind: 'close' };
    return undefined;
  }

  private bodyStep(): ParseResult {
    const body = this.body!;
    if (body.kind === 'none') return this.finish(true);
    if (body.kind === 'close') {
      const problem = this.take(this.pending);
      this.pending = Buffer.alloc(0);
      return problem;
    }
    if (body.kind === 'length') {
      const { taken, problem } = this.takePending(body.left);
      body.left -= taken;
      if (problem !== undefined) return problem;
      return body.left === 0 ? this.finish(true) : undefined;
    }
    return this.chunkedStep();
  }

  /** Up to `left` bytes of what is pending taken into the body: how many, and any problem with them. */
  private takePending(left: number): { taken: number; problem: ParseResult } {
    const part = this.pending.subarray(0, left);
    this.pending = this.pending.subarray(part.length);
    return { taken: part.length, problem: this.take(part) };
  }

  private chunkedStep(): ParseResult {
    for (;;) {
      const c = this.chunk;
      if (c.phase === 'data') {
        const { taken, problem } = this.takePending(c.left);
        c.left -= taken;
        if (problem !== undefined) return problem;
        if (c.left > 0) return undefined;
        this.chunk = { phase: 'crlf' };
        continue;
      }
      const eol = this.pending.indexOf('\r\n');
      if (eol < 0) return this.pending.length > MAX_HEAD_BYTES ? { error: 'connection error: malformed response' } : undefined;
      const line = this.pending.subarray(0, eol).toString('latin1');
      this.pending = this.pending.subarray(eol + 2);
      if (c.phase === 'crlf') {
        if (line !== '') return { error: 'connection error: malformed response' };
        this.chunk = { phase: 'size' };
      } else if (c.phase === 'size') {
        const size = /^([0-9a-fA-F]{1,8})(?:[ \t]*;.*)?$/.exec(line);
        if (size === null) return { error: 'connection error: malformed response' };
        const n = Number.parseInt(size[1]!, 16);
        this.chunk = n === 0 ? { phase: 'trailers' } : { phase: 'data', left: n };
      } else if (line === '') return this.finish(true);
    }
  }

  /** Counts body bytes against the bound and keeps the excerpt's. */
  private take(part: Buffer): ParseResult {
    if (part.length === 0) return undefined;
    this.bodyBytes += part.length;
    if (this.bodyBytes > this.maxBody) return { error: `response larger than ${this.maxBody} bytes` };
    if (this.keptBytes < this.excerptBytes) {
      const slice = part.subarray(0, this.excerptBytes - this.keptBytes);
      this.kept.push(slice);
      this.keptBytes += slice.length;
    }
    return undefined;
  }

  private finish(delimited: boolean): ParseResult {
    return {
      done: {
        status: this.status,
        headers: this.headers,
        excerpt: Buffer.concat(this.kept),
        reusable: delimited && this.keepAlive && this.pending.length === 0,
      },
    };
  }
}
