import { unavailable } from '../errors/domain.js';
import type { Logger } from '../log.js';
import type { IdEntity } from '../shards/records.js';
import type { IdSource } from '../shards/writer.js';
import type { ControlKv } from './controlKv.js';
import type { ControlPlane } from './controlPlane.js';

const ENTITIES: IdEntity[] = ['asset', 'location', 'tag', 'history'];
/** Ids per block in cluster mode: a KV round trip per block, so larger than the local file's 1000. */
const BLOCK = 10_000;

/**
 * A shard's id source in cluster mode: blocks reserved in the cluster's bucket (ControlKv.reserveIds,
 * so no two shards on any nodes ever draw the same id), handed to the writer synchronously from a
 * spare block per entity kept ready ahead; taking one fetches the next. Should a writer outrun the
 * fetch, the command is refused with 503 (nothing changed; a scan batch is retried) rather than
 * blocking the actor's thread on the broker.
 */
export class KvIdBlocks implements IdSource {
  private readonly spare = new Map<IdEntity, { start: number; end: number }>();
  private readonly fetching = new Map<IdEntity, Promise<void>>();

  private constructor(
    private readonly kv: ControlKv,
    private readonly control: ControlPlane,
    private readonly logger: Pick<Logger, 'error'> | undefined,
  ) {}

  static async open(kv: ControlKv, control: ControlPlane, logger?: Pick<Logger, 'error'>): Promise<KvIdBlocks> {
    const blocks = new KvIdBlocks(kv, control, logger);
    await Promise.all(ENTITIES.map((entity) => blocks.refill(entity)));
    return blocks;
  }

  reserveIds(entity: IdEntity): { start: number; end: number } {
    const block = this.spare.get(entity);
    this.spare.delete(entity);
    void this.refill(entity);
    if (block === undefined) throw unavailable(`No ${entity} ids in hand yet (a block is being reserved); nothing was changed`, 1);
    return block;
  }

  private refill(entity: IdEntity): Promise<void> {
    let pending = this.fetching.get(entity);
    if (pending === undefined && !this.spare.has(entity)) {
      pending = this.kv
        .reserveIds(entity, BLOCK, this.control.localNextId(entity))
        .then((block) => void this.spare.set(entity, block))
        .catch((err) => this.logger?.error({ err, entity }, 'id block reservation failed'))
        .finally(() => this.fetching.delete(entity));
      this.fetching.set(entity, pending);
    }
    return pending ?? Promise.resolve();
  }
}
