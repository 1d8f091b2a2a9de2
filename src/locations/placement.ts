import type { ShardWriter } from '../shards/writer.js';

/**
 * What the location rules ask of the scan side: whether live assets are currently placed at a
 * location (the second rule of a location delete). The scan side answers it (scans/placement.ts);
 * the shard actor is handed the answerer when it is built (WriterPorts).
 */
export interface AssetPlacement {
  /** Runs on the writer, inside the asking command's transaction. */
  hasLiveAssetsAt(shard: ShardWriter, orgId: number, locationId: number): boolean;
}
