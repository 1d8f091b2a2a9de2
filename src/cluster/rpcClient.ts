import { TimeoutError, type NatsConnection } from '@nats-io/transport-node';
import { ApiError } from '../errors/catalog.js';
import { isNoResponders } from './presence.js';
import { decodeAnswer, encodeRequest, rpcSubject, type ForwardedAnswer, type ForwardedRequest } from './rpcWire.js';

export interface RpcTimings {
  /** How long a read keeps asking while no node owns the shard (a failover); writes do not wait. */
  readRetryMs: number;
  /** How long one request waits for the owner's answer (its mailbox refuses commands older than 10 s). */
  answerTimeoutMs: number;
  /** Retry-After of the 503s of a failover. */
  retryAfterSeconds: number;
}

export const DEFAULT_RPC_TIMINGS: RpcTimings = { readRetryMs: 2000, answerTimeoutMs: 12_000, retryAfterSeconds: 2 };

export type Miss = 'no owner' | 'timeout' | 'broker';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The front node's side of shard RPC: a request for a shard this node does not own goes to
 * `trackd.shard.<n>.rpc`, which only the owner subscribes to. While nobody answers (no owner, a
 * failover), a read asks again for up to `readRetryMs`; a write is refused at once with 503 and
 * Retry-After (nothing was run). An owner that does not answer in time: 503 too, and for a write
 * its outcome is unknown (the owner may still commit it), which the detail says.
 */
export class ShardRpcClient {
  constructor(
    private readonly nc: NatsConnection,
    /** Each attempt that got no answer from an owner (metrics). */
    private readonly onMiss: (miss: Miss) => void = () => {},
    private readonly timings: RpcTimings = DEFAULT_RPC_TIMINGS,
  ) {}

  /** `answerTimeoutMs`: longer for an upload, which the owner answers once it has read the whole body. */
  async forward(
    shard: number,
    request: ForwardedRequest,
    isRead: boolean,
    answerTimeoutMs = this.timings.answerTimeoutMs,
  ): Promise<ForwardedAnswer> {
    const data = encodeRequest(request);
    const maxPayload = this.nc.info?.max_payload ?? Number.POSITIVE_INFINITY;
    if (data.byteLength > maxPayload)
      throw new ApiError(
        'service_unavailable',
        `The request (${data.byteLength} bytes) is larger than the broker's max_payload (${maxPayload} bytes) and cannot reach the node that owns this organization; the operator must raise max_payload`,
      );
    const deadline = Date.now() + this.timings.readRetryMs;
    let pause = 25;
    for (;;) {
      const miss = await this.ask(shard, data, answerTimeoutMs);
      if (typeof miss !== 'string') return miss;
      this.onMiss(miss);
      if (!isRead || miss === 'timeout' || Date.now() + pause > deadline) throw this.failover(miss, isRead, answerTimeoutMs);
      await sleep(pause);
      pause = Math.min(pause * 2, 250);
    }
  }

  private async ask(shard: number, data: Uint8Array, timeout: number): Promise<ForwardedAnswer | Miss> {
    try {
      const msg = await this.nc.request(rpcSubject(shard), data, { timeout });
      const answer = decodeAnswer(msg.data);
      return answer.notOwner ? 'no owner' : answer;
    } catch (err) {
      if (isNoResponders(err)) return 'no owner';
      if (err instanceof TimeoutError || (err as Error).cause instanceof TimeoutError) return 'timeout';
      return 'broker';
    }
  }

  private failover(miss: Miss, isRead: boolean, answerTimeoutMs: number): ApiError {
    const headers = { 'Retry-After': String(this.timings.retryAfterSeconds) };
    const detail =
      miss === 'timeout'
        ? `The node that owns this organization did not answer within ${answerTimeoutMs / 1000} s${isRead ? '' : '; the write may still be applied'}`
        : miss === 'no owner'
          ? `No node serves this organization right now (its shard is moving to another node)${isRead ? '' : '; nothing was changed'}`
          : `The broker between the nodes is unavailable${isRead ? '' : '; the write may still be applied'}`;
    return new ApiError('service_unavailable', detail, { headers });
  }
}
