import { Readable } from 'node:stream';
import { Objm, StorageType, type ObjectStore } from '@nats-io/obj';
import { jetstream } from '@nats-io/jetstream';
import { nanos, type NatsConnection } from '@nats-io/transport-node';

/**
 * Uploads (bulk import bodies) sent to a node that does not own the org's shard are staged here:
 * the front node streams the body into object `<ulid>`, forwards the request without a body
 * and with the object's name, the owner reads the object as the request's body, and the front node
 * deletes it once the owner has answered. An object a dead front node left behind ages out. An
 * owner stages an answer over the broker's max_payload (a large export) the same way.
 */
export const UPLOAD_BUCKET = 'trackd_uploads';
const STAGED_MAX_AGE_MS = 24 * 3600 * 1000;

export class StagedUploads {
  private bucket: Promise<ObjectStore> | undefined;

  constructor(
    private readonly nc: NatsConnection,
    private readonly replicas: number,
  ) {}

  private store(): Promise<ObjectStore> {
    this.bucket ??= new Objm(jetstream(this.nc, { timeout: 10_000 }))
      .create(UPLOAD_BUCKET, { storage: StorageType.File, replicas: this.replicas, ttl: nanos(STAGED_MAX_AGE_MS) })
      .catch((err: unknown) => {
        this.bucket = undefined;
        throw err;
      });
    return this.bucket;
  }

  /** Streams `body` into object `name`; resolves with its size once the object store holds all of it. */
  async stage(name: string, body: AsyncIterable<Buffer> | Iterable<Buffer>): Promise<number> {
    // Chunks of 128 KiB (the object store's default), or less on a broker that takes less per message.
    const maxChunk = Math.min(128 * 1024, (this.nc.info?.max_payload ?? 1024 * 1024) - 4096);
    const info = await (await this.store()).put(
      { name, options: { max_chunk_size: maxChunk } },
      Readable.toWeb(Readable.from(body, { objectMode: false })) as ReadableStream<Uint8Array>,
    );
    return info.size;
  }

  /** The body of object `name`, chunk by chunk; throws when it is gone or its read fails. */
  async *read(name: string): AsyncGenerator<Uint8Array> {
    const object = await (await this.store()).get(name);
    if (object === null) throw new Error(`the staged upload ${name} is gone`);
    const reader = object.data.getReader();
    let done = false;
    try {
      for (;;) {
        const next = await reader.read();
        if (next.done) break;
        yield next.value;
      }
      done = true;
    } finally {
      // Left early (answered before the body's end): the object store's reader stops too.
      if (!done) await reader.cancel().catch(() => undefined);
    }
    const failed = await object.error;
    if (failed) throw failed;
  }

  /** Deletes object `name` (the owner has answered); a failure leaves it to age out. */
  async drop(name: string): Promise<void> {
    await (await this.store()).delete(name).catch(() => undefined);
  }
}
