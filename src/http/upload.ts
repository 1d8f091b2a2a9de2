import type uWS from 'uWebSockets.js';
import { ApiError } from '../errors/catalog.js';

export interface UploadLimits {
  maxBytes: number;
  /** Bytes held before the socket is paused (uWS `pause`), resumed when the reader drained half of them. */
  highWaterBytes: number;
  /** Longest pause of the client between chunks (not counting our own pauses). */
  idleMs: number;
}

/**
 * A request body read as a stream (uploads: bulk imports): chunks are copied out of uWS as they
 * arrive and handed to one async reader; past `highWaterBytes` not yet read the socket is paused,
 * so a body is never held whole, however large its limit. Ends with the body, or throws the
 * ApiError that stopped it (over the limit: 413; a client silent for `idleMs`: 408; gone).
 */
export class UploadStream implements AsyncIterable<Buffer> {
  private readonly chunks: Buffer[] = [];
  private held = 0;
  private received = 0;
  private ended = false;
  private failure: Error | undefined;
  private wake: (() => void) | undefined;
  private paused = false;
  /** Set once the response is over (answered or aborted): `res` must not be touched after. */
  private closed = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly res: uWS.HttpResponse,
    private readonly limits: UploadLimits,
  ) {
    this.arm();
    res.onData((chunk, isLast) => this.onChunk(chunk, isLast));
  }

  /** Bytes of body received so far. */
  get bytes(): number {
    return this.received;
  }

  /** Whether the whole body was received. */
  get complete(): boolean {
    return this.ended;
  }

  private onChunk(chunk: ArrayBuffer, isLast: boolean): void {
    if (this.failure !== undefined) return;
    this.received += chunk.byteLength;
    if (this.received > this.limits.maxBytes) {
      this.fail(new ApiError('payload_too_large', `Request body exceeds the ${this.limits.maxBytes} byte limit of this endpoint`));
      return;
    }
    // uWS neuters the chunk when this callback returns: copy it.
    if (chunk.byteLength > 0) {
      this.chunks.push(Buffer.from(new Uint8Array(chunk)));
      this.held += chunk.byteLength;
    }
    if (isLast) {
      this.ended = true;
      clearTimeout(this.timer);
    } else if (this.held > this.limits.highWaterBytes && !this.paused && !this.closed) {
      this.paused = true;
      clearTimeout(this.timer);
      this.res.pause();
    } else this.arm();
    this.signal();
  }

  private arm(): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(
      () => this.fail(new ApiError('request_timeout', `Request body stalled: nothing arrived for ${this.limits.idleMs / 1000} seconds`)),
      this.limits.idleMs,
    );
    this.timer.unref();
  }

  private signal(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  /** Stops the stream with `err` (the client went away, a limit); the reader throws it at its next read. */
  fail(err: Error): void {
    if (this.failure !== undefined || this.ended) return;
    this.failure = err;
    clearTimeout(this.timer);
    this.chunks.length = 0;
    this.signal();
  }

  /** The response is over (answered, or the client went away): drop what is held and never touch `res` again. */
  close(reason = 'The request was answered before its body was read'): void {
    this.closed = true;
    this.fail(new ApiError('bad_request', reason));
  }

  async *[Symbol.asyncIterator](): AsyncIterator<Buffer> {
    for (;;) {
      const chunk = this.chunks.shift();
      if (chunk !== undefined) {
        this.held -= chunk.byteLength;
        if (this.paused && this.held <= this.limits.highWaterBytes / 2 && !this.closed) {
          this.paused = false;
          this.res.resume();
          this.arm();
        }
        yield chunk;
        continue;
      }
      if (this.failure !== undefined) throw this.failure;
      if (this.ended) return;
      await new Promise<void>((resolve) => {
        this.wake = resolve;
      });
    }
  }
}
