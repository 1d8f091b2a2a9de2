import type { Msg, NatsConnection, Subscription } from '@nats-io/transport-node';
import { ApiError } from '../errors/catalog.js';
import { errorEnvelope } from '../errors/envelope.js';
import type { Logger } from '../log.js';
import { monotonicFactory } from 'ulid';
import type { StagedUploads } from './uploads.js';
import { decodeRequest, encodeAnswer, rpcSubject, type ForwardedAnswer, type ForwardedRequest } from './rpcWire.js';

const nextUlid = monotonicFactory(Math.random);

/** Runs a forwarded request through this node's own pipeline (HttpServer.serveForwarded). */
export type ForwardedHandler = (request: ForwardedRequest) => Promise<ForwardedAnswer>;

const NOT_OWNER: ForwardedAnswer = { status: 503, headers: {}, contentType: undefined, body: undefined, notOwner: true };

/**
 * The owner's side of shard RPC on one HTTP thread: it subscribes to `trackd.shard.<n>.rpc` for each
 * shard this node owns (a queue group per shard, so the node's HTTP threads share its requests) and
 * leaves the subject when the shard goes. A request that arrives for a shard no longer owned here
 * (the lease moved between subscribe and delivery) is answered "not the owner" without running,
 * and the front node asks again.
 */
export class ShardRpcServer {
  private readonly subscriptions = new Map<number, Subscription>();

  constructor(
    private readonly nc: NatsConnection,
    private readonly isLocal: (shard: number) => boolean,
    private readonly handle: ForwardedHandler,
    private readonly logger: Logger,
    /** Where an answer over the broker's max_payload is staged for the front node to read. */
    private readonly uploads?: StagedUploads,
  ) {}

  /** Subscribes to the shards in `local` and leaves the others (called with every change of ownership). */
  follow(local: number[]): void {
    const wanted = new Set(local);
    for (const [shard, subscription] of this.subscriptions)
      if (!wanted.has(shard)) {
        // Drained, not unsubscribed: a request the broker delivered before it saw the UNSUB still gets
        // "not the owner" (a write refused at once) instead of no answer (the front node's 12 s timeout).
        subscription.drain().catch(() => {});
        this.subscriptions.delete(shard);
      }
    for (const shard of wanted) {
      if (this.subscriptions.has(shard)) continue;
      this.subscriptions.set(
        shard,
        this.nc.subscribe(rpcSubject(shard), {
          queue: `trackd.shard.${shard}`,
          callback: (err, msg) => {
            if (err === null) void this.answer(shard, msg);
          },
        }),
      );
    }
  }

  /** Resolves once the server has every subscription (a front node's request may follow at once). */
  flush(): Promise<void> {
    return this.nc.flush();
  }

  close(): void {
    for (const subscription of this.subscriptions.values()) subscription.unsubscribe();
    this.subscriptions.clear();
  }

  private async answer(shard: number, msg: Msg): Promise<void> {
    let answer: ForwardedAnswer;
    let request: ForwardedRequest | undefined;
    try {
      request = decodeRequest(msg.data);
      answer = this.isLocal(shard) ? await this.handle(request) : NOT_OWNER;
    } catch (err) {
      this.logger.error({ err, shard }, 'shard RPC request failed');
      answer = errorAnswer(new ApiError('service_unavailable', 'The node that owns this organization could not run the request'), request);
    }
    const maxPayload = this.nc.info?.max_payload ?? Number.POSITIVE_INFINITY;
    if (answer.stream !== undefined) answer = await this.settleStream(shard, answer, maxPayload, request);
    let data = encodeAnswer(answer);
    if (data.byteLength > maxPayload && answer.body !== undefined && this.uploads !== undefined) {
      // A large answer (an export): its body goes through the object store, the front node reads it there.
      const staged = `answer-${nextUlid()}`;
      try {
        await this.uploads.stage(staged, [Buffer.from(answer.body, 'utf8')]);
        data = encodeAnswer({ ...answer, body: undefined, staged });
      } catch (err) {
        this.logger.error({ err, shard }, 'shard RPC answer could not be staged');
      }
    }
    if (data.byteLength > maxPayload)
      data = encodeAnswer(
        errorAnswer(
          new ApiError(
            'service_unavailable',
            `The answer (${data.byteLength} bytes) is larger than the broker's max_payload (${maxPayload} bytes) and cannot be forwarded between nodes; the operator must raise max_payload`,
          ),
          request,
        ),
      );
    msg.respond(data);
  }

  /**
   * A streamed answer (an export) as it is written: kept whole while it stays under half the
   * broker's max_payload, else staged in the object store piece by piece as the handler writes
   * them (its writes wait while the store lags), so the owner never holds the whole body.
   */
  private async settleStream(
    shard: number,
    answer: ForwardedAnswer,
    maxPayload: number,
    request: ForwardedRequest | undefined,
  ): Promise<ForwardedAnswer> {
    const { stream, ...rest } = answer;
    const pieces = stream![Symbol.asyncIterator]();
    const head: Buffer[] = [];
    let size = 0;
    try {
      for (;;) {
        const next = await pieces.next();
        if (next.done) return { ...rest, body: Buffer.concat(head).toString('utf8') };
        head.push(next.value);
        size += next.value.byteLength;
        if (size > maxPayload / 2 && this.uploads !== undefined) break;
      }
      const staged = `answer-${nextUlid()}`;
      await this.uploads!.stage(
        staged,
        (async function* () {
          yield* head.splice(0);
          for (let next = await pieces.next(); !next.done; next = await pieces.next()) yield next.value;
        })(),
      );
      return { ...rest, body: undefined, staged };
    } catch (err) {
      this.logger.error({ err, shard }, 'shard RPC answer could not be staged');
      // The handler stops writing (its exchange counts as aborted): an export's statement is closed.
      await pieces.return?.(undefined);
      return errorAnswer(new ApiError('service_unavailable', 'The node that owns this organization could not send its answer'), request);
    }
  }
}

/** An error answered in the contract's envelope for the request's path and id. */
function errorAnswer(error: ApiError, request: ForwardedRequest | undefined): ForwardedAnswer {
  const url = request?.url ?? '';
  const path = url.includes('?') ? url.slice(0, url.indexOf('?')) : url;
  const body = JSON.stringify(errorEnvelope(error, path, request?.headers['x-request-id'] ?? ''));
  return { status: error.status, headers: error.headers ?? {}, contentType: 'application/json', body };
}
