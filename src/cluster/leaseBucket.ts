import type { NatsConnection } from '@nats-io/transport-node';
import {
  DiscardPolicy,
  JetStreamApiCodes,
  jetstream,
  jetstreamManager,
  StorageType,
  type JetStreamClient,
  type JetStreamManager,
} from '@nats-io/jetstream';
import { ADMIN_OPTIONS, isApiError, streamWithLeader } from '../scans/streams.js';

/** The NATS KV bucket of shard leases and node heartbeats (docs/cluster.md, step 3). */
export const LEASE_BUCKET = 'trackd_leases';

/** An update refused because the key moved past the revision it was based on. */
export class RevisionMoved extends Error {
  constructor(
    readonly key: string,
    readonly expected: number,
    bucket = LEASE_BUCKET,
  ) {
    super(`${bucket}/${key}: moved past revision ${expected}`);
    this.name = 'RevisionMoved';
  }
}

/**
 * A NATS KV bucket in KV's own stream layout (`KV_<bucket>`, subjects `$KV.<bucket>.<key>`, one
 * value per key, no TTL), written through JetStream directly since the project carries no KV
 * client: `nats kv get trackd_leases shard.3` reads it. A key's revision is the stream sequence of
 * its value; an update names the revision it replaces (`Nats-Expected-Last-Subject-Sequence`), so
 * two writers racing on a key cannot both win. No TTL on purpose: on nats-server 2.9 a stream
 * leader election takes 4 to 9 s, and a TTL shorter than that would drop every lease on each one;
 * liveness is judged by readers from revisions that move.
 */
export class LeaseBucket {
  /** The bucket's stream (`KV_<bucket>`). */
  readonly stream: string;
  /** Its subjects' prefix (`$KV.<bucket>.`). */
  readonly prefix: string;

  private constructor(
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    private readonly timeoutMs: number,
    readonly bucket: string,
  ) {
    this.stream = `KV_${bucket}`;
    this.prefix = `$KV.${bucket}.`;
  }

  /** Opens (creating it if missing) the bucket: the leases by default, or another of the same layout (the control plane's). */
  static async open(nc: NatsConnection, replicas: number, timeoutMs: number, bucket = LEASE_BUCKET): Promise<LeaseBucket> {
    const stream = `KV_${bucket}`;
    const prefix = `$KV.${bucket}.`;
    const jsm = await jetstreamManager(nc, ADMIN_OPTIONS);
    try {
      await jsm.streams.info(stream);
    } catch (err) {
      if (!isApiError(err, JetStreamApiCodes.StreamNotFound)) throw err;
      await jsm.streams
        .add({
          name: stream,
          subjects: [`${prefix}>`],
          storage: StorageType.File,
          num_replicas: replicas,
          max_msgs_per_subject: 1,
          discard: DiscardPolicy.New,
          allow_rollup_hdrs: true,
          deny_delete: true,
          allow_direct: true,
        })
        .catch(async (added) => jsm.streams.info(stream).catch(() => Promise.reject(added)));
    }
    // Created by this node or another a moment ago, it may have no leader yet: writes would be refused.
    await streamWithLeader(jsm, stream);
    return new LeaseBucket(jetstream(nc), jsm, timeoutMs, bucket);
  }

  /** A key's value and revision; undefined when it was never written. */
  async get<T>(key: string): Promise<{ value: T; revision: number } | undefined> {
    const msg = await this.jsm.streams.getMessage(this.stream, { last_by_subj: this.prefix + key });
    return msg === null ? undefined : { value: msg.json<T>(), revision: msg.seq };
  }

  /** Writes `value` over revision `expected` (0: the key must not exist); resolves with the new revision. */
  async put(key: string, value: unknown, expected: number): Promise<number> {
    try {
      const ack = await this.js.publish(this.prefix + key, JSON.stringify(value), {
        expect: { lastSubjectSequence: expected },
        timeout: this.timeoutMs,
      });
      return ack.seq;
    } catch (err) {
      if (isApiError(err, JetStreamApiCodes.StreamWrongLastSequence)) throw new RevisionMoved(key, expected, this.bucket);
      throw err;
    }
  }

  /** The keys under `prefix` (e.g. `node.`). */
  async keys(prefix: string): Promise<string[]> {
    const info = await this.jsm.streams.info(this.stream, { subjects_filter: `${this.prefix}${prefix}>` });
    return Object.keys(info.state.subjects ?? {}).map((subject) => subject.slice(this.prefix.length));
  }
}
