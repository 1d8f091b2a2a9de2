import type uWS from 'uWebSockets.js';

/** A request handed to the server without a socket (tests, tools): what a client would have sent. */
export interface InjectedRequest {
  method: string;
  /** Path with an optional query string, as on the request line. */
  url: string;
  /** Header names in any case. */
  headers?: Record<string, string>;
  /** A body in one piece, or streamed (a forwarded upload): its chunks arrive as the server's reads let them (pause, resume). */
  body?: string | Buffer | AsyncIterable<Uint8Array>;
  remoteAddress?: string;
  /**
   * A streamed answer (an export) resolves at its first piece with `stream`, which yields the
   * pieces as the handler writes them; the handler's writes push back (false, then onWritable)
   * while the reader lags. Otherwise the pieces are kept until the answer's end.
   */
  streamAnswer?: boolean;
}

export interface InjectedResponse {
  status: number;
  /** Lower-cased names, as a client library would present them. */
  headers: Record<string, string>;
  body: string;
  /** A streamed answer's pieces (with `streamAnswer`); `body` is then empty. */
  stream?: AsyncIterable<Buffer>;
}

/** Bytes a streamed answer's reader may lag behind before the handler's writes push back. */
const ANSWER_HIGH_WATER = 1024 * 1024;

/**
 * A streamed answer's pieces between the handler's writes and one reader: push says false once
 * ANSWER_HIGH_WATER bytes wait, and `drained` is called when the reader has taken them below it.
 */
class AnswerPipe implements AsyncIterable<Buffer> {
  private readonly pieces: Buffer[] = [];
  private waiting = 0;
  private ended = false;
  private failed: Error | undefined;
  private wake: (() => void) | undefined;
  drained: (() => void) | undefined;
  /** The reader left before the end: the handler must stop (as if its client went away). */
  abandoned: (() => void) | undefined;

  push(piece: string | Uint8Array): boolean {
    const bytes = typeof piece === 'string' ? Buffer.from(piece, 'utf8') : Buffer.from(piece);
    this.pieces.push(bytes);
    this.waiting += bytes.byteLength;
    this.wakeReader();
    return this.waiting < ANSWER_HIGH_WATER;
  }

  end(): void {
    this.ended = true;
    this.wakeReader();
  }

  fail(err: Error): void {
    this.failed = err;
    this.wakeReader();
  }

  private wakeReader(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<Buffer> {
    let read = false;
    try {
      for (;;) {
        const piece = this.pieces.shift();
        if (piece !== undefined) {
          const before = this.waiting;
          this.waiting -= piece.byteLength;
          // The handler is told on a later turn: its onWritable handler writes again, into this pipe.
          if (before >= ANSWER_HIGH_WATER && this.waiting < ANSWER_HIGH_WATER) setImmediate(() => this.drained?.());
          yield piece;
          continue;
        }
        if (this.failed !== undefined) throw this.failed;
        if (this.ended) break;
        await new Promise<void>((resolve) => (this.wake = resolve));
      }
      read = true;
    } finally {
      if (!read && !this.ended && this.failed === undefined) this.abandoned?.();
    }
  }
}

type Handler = (res: uWS.HttpResponse, req: uWS.HttpRequest) => void;

/**
 * Runs `handler` (the server's one uWS handler) on a request and response pair that record instead of
 * touching a socket, so the request takes exactly the path a real one takes: the same steps, errors,
 * headers, logs and metrics. Only the uWS calls the server makes are implemented; any other throws,
 * which a test then reports instead of passing by accident. The body arrives in one last chunk, on a
 * later turn of the event loop, as a small body from the network does.
 */
export function inject(handler: Handler, request: InjectedRequest): Promise<InjectedResponse> {
  const queryAt = request.url.indexOf('?');
  const path = queryAt < 0 ? request.url : request.url.slice(0, queryAt);
  const query = queryAt < 0 ? undefined : request.url.slice(queryAt + 1);
  const requestHeaders = new Map<string, string>();
  for (const [name, value] of Object.entries(request.headers ?? {})) requestHeaders.set(name.toLowerCase(), value);
  const streamed = typeof request.body === 'object' && Symbol.asyncIterator in request.body ? request.body : undefined;
  const body = request.body === undefined || streamed !== undefined ? undefined : Buffer.from(request.body as string | Buffer);
  if (body !== undefined && !requestHeaders.has('content-length')) requestHeaders.set('content-length', String(body.byteLength));

  return new Promise((resolve) => {
    const headers: Record<string, string> = {};
    let status = 200;
    let ended = false;
    const written: string[] = [];
    let onData: ((chunk: ArrayBuffer, isLast: boolean) => void) | undefined;
    let pipe: AnswerPipe | undefined;
    let onWritable: (() => boolean) | undefined;
    let onAborted: (() => void) | undefined;
    let paused = false;
    let resumed: (() => void) | undefined;
    const finish = (text: string, contentLength: number) => {
      if (ended) throw new Error('the response was ended twice');
      ended = true;
      resumed?.();
      if (pipe !== undefined) {
        if (contentLength < 0) pipe.fail(new Error('the streamed answer was cut off'));
        else {
          if (text !== '') pipe.push(text);
          pipe.end();
        }
        return;
      }
      headers['content-length'] = String(contentLength);
      headers.uwebsockets = 'injected';
      resolve({ status, headers, body: text });
    };
    const res = {
      onAborted(handler: () => void) {
        onAborted = handler;
        return res;
      },
      onData(handler: (chunk: ArrayBuffer, isLast: boolean) => void) {
        onData = handler;
        return res;
      },
      cork(run: () => void) {
        run();
        return res;
      },
      writeStatus(text: string) {
        status = Number.parseInt(text, 10);
        return res;
      },
      writeHeader(name: string, value: string) {
        const key = name.toLowerCase();
        headers[key] = headers[key] === undefined ? value : `${headers[key]}, ${value}`;
        return res;
      },
      /** A streamed answer's pieces: kept until its end, or (streamAnswer) handed to the reader as they come. */
      write(chunk: string) {
        if (request.streamAnswer !== true) {
          written.push(chunk);
          return true;
        }
        if (pipe === undefined) {
          pipe = new AnswerPipe();
          pipe.drained = () => onWritable?.();
          pipe.abandoned = () => onAborted?.();
          headers.uwebsockets = 'injected';
          resolve({ status, headers, body: '', stream: pipe });
        }
        return pipe.push(chunk);
      },
      onWritable(handler: () => boolean) {
        onWritable = handler;
        return res;
      },
      pause() {
        paused = true;
      },
      resume() {
        paused = false;
        resumed?.();
      },
      close() {
        finish(written.join(''), -1);
        return res;
      },
      end(text: string | undefined, _closeConnection?: boolean) {
        if (pipe !== undefined) {
          finish(text ?? '', 0);
          return res;
        }
        const out = written.join('') + (text ?? '');
        finish(out, Buffer.byteLength(out));
        return res;
      },
      endWithoutBody(reportedLength: number | undefined, _closeConnection?: boolean) {
        finish('', reportedLength ?? 0);
        return res;
      },
      getRemoteAddressAsText: () => new TextEncoder().encode(request.remoteAddress ?? '127.0.0.1').buffer,
    };
    const req = {
      getCaseSensitiveMethod: () => request.method,
      getUrl: () => path,
      getQuery: () => query,
      getHeader: (name: string) => requestHeaders.get(name) ?? '',
    };
    const unsupported = (target: object) =>
      new Proxy(target, {
        get(object, key) {
          if (key in object) return object[key as keyof typeof object];
          throw new Error(`inject: uWS ${String(key)} is not implemented`);
        },
      });
    handler(unsupported(res) as unknown as uWS.HttpResponse, unsupported(req) as unknown as uWS.HttpRequest);
    // The body arrives even when the answer went out first (401, 413): the network delivers it anyway.
    setImmediate(() => {
      if (onData === undefined) return;
      if (streamed !== undefined) {
        void deliver(
          streamed,
          onData,
          () => (paused ? new Promise<void>((r) => (resumed = r)) : undefined),
          () => ended,
        );
        return;
      }
      const bytes = body ?? Buffer.alloc(0);
      onData(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer, true);
    });
  });
}

/**
 * A streamed body to the server's onData, one chunk at a time, waiting while it has paused the
 * "socket". A body whose source fails stops there: the server's idle limit then fails the upload.
 */
async function deliver(
  body: AsyncIterable<Uint8Array>,
  onData: (chunk: ArrayBuffer, isLast: boolean) => void,
  pausedUntil: () => Promise<void> | undefined,
  answered: () => boolean,
): Promise<void> {
  const whilePaused = async () => {
    for (let wait = pausedUntil(); wait !== undefined; wait = pausedUntil()) await wait;
  };
  try {
    for await (const chunk of body) {
      await whilePaused();
      // Answered before the body's end (a bad header row, a refused key): the rest is not read.
      if (answered()) return;
      onData(chunk.buffer.slice(chunk.byteOffset, chunk.byteOffset + chunk.byteLength) as ArrayBuffer, false);
    }
  } catch {
    return;
  }
  await whilePaused();
  onData(new ArrayBuffer(0), true);
}
