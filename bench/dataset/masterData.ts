/**
 * Bulk loader for master data: writes assets with tags and a location tree straight into the
 * organization's shard file while trackd is stopped, with the rows trackd's own create path writes
 * (the shard migrations give the identical schema; ids come from the control plane's id blocks so
 * that later creates never collide). Much faster than a million POSTs, and the same rows.
 */
import path from 'node:path';
import { shardMigrations } from '../../migrations/shard/index.js';
import { ControlPlane } from '../../src/control/controlPlane.js';
import { migrate, openDatabase } from '../../src/storage/sqlite.js';
import { assetKey, locationKey, rfidValue, type DatasetInfo, type DatasetSize, type SizeName } from './sizes.js';

const WORDS_A = ['Blue', 'Heavy', 'Spare', 'Cold', 'Mobile', 'Sealed', 'Rented', 'Large', 'Small', 'Steel'];
const WORDS_B = ['Pallet', 'Forklift', 'Cage', 'Container', 'Scanner', 'Trolley', 'Crate', 'Drum', 'Rack', 'Tote'];
const DAY = 86_400_000;
const WIDE_FANOUT = 10;

/** A small deterministic PRNG so that the same size gives the same dataset. */
function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export async function loadMasterData(dataDir: string, orgId: number, sizeName: SizeName, size: DatasetSize): Promise<DatasetInfo> {
  const started = performance.now();
  const control = await ControlPlane.open(dataDir);
  const org = control.getOrg(orgId);
  if (org === undefined) throw new Error(`org ${orgId} does not exist`);
  const shardFile = path.join(dataDir, 'shards', `shard-${org.shard}.sqlite`);
  await migrate(shardFile, shardMigrations);
  const locationIds = control.reserveIds('location', size.locations);
  const assetIds = control.reserveIds('asset', size.assets);
  const tagIds = control.reserveIds('tag', size.assets * 2);
  control.close();

  const db = openDatabase(shardFile);
  const random = prng(42);
  const now = Date.now();
  const validFrom = now - 365 * DAY;

  // Locations: a deep parent chain, then a complete WIDE_FANOUT-ary tree in breadth-first id order.
  const insertLocation = db.prepare(
    `INSERT INTO locations (id, org_id, external_key, name, description, parent_id, is_active, valid_from, valid_to, created_at, updated_at, deleted_at)
     VALUES (?, ?, ?, ?, ?, ?, 1, ?, NULL, ?, ?, NULL)`,
  );
  const deepBranch: number[] = [];
  const wideIds: number[] = [];
  db.transaction(() => {
    for (let i = 0; i < size.locations; i++) {
      const id = locationIds.start + i;
      let parent: number | null;
      if (i < size.deepBranch) {
        parent = i === 0 ? null : id - 1;
        deepBranch.push(id);
      } else {
        const w = wideIds.length;
        parent = w === 0 ? null : wideIds[Math.floor((w - 1) / WIDE_FANOUT)]!;
        wideIds.push(id);
      }
      const created = now - Math.floor(random() * 30 * DAY);
      insertLocation.run(
        id,
        orgId,
        locationKey(id),
        `${i < size.deepBranch ? 'Level' : 'Zone'} ${i}`,
        i % 3 === 0 ? `Location ${i}` : null,
        parent,
        validFrom,
        created,
        created,
      );
    }
  })();

  // Assets, each with an rfid tag and every third also with a barcode.
  const insertAsset = db.prepare(
    `INSERT INTO assets (id, org_id, external_key, name, description, is_active, metadata, valid_from, valid_to, created_at, updated_at, deleted_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, NULL)`,
  );
  const insertTag = db.prepare(
    'INSERT INTO tags (id, org_id, tag_type, value, asset_id, location_id, created_at, deleted_at) VALUES (?, ?, ?, ?, ?, NULL, ?, NULL)',
  );
  let tagId = tagIds.start;
  const BATCH = 20_000;
  for (let from = 0; from < size.assets; from += BATCH) {
    db.transaction(() => {
      for (let i = from; i < Math.min(size.assets, from + BATCH); i++) {
        const id = assetIds.start + i;
        const created = now - Math.floor(random() * 30 * DAY);
        const name = `${WORDS_A[(random() * WORDS_A.length) | 0]} ${WORDS_B[(random() * WORDS_B.length) | 0]} ${i}`;
        const metadata = JSON.stringify({ category: WORDS_B[i % WORDS_B.length]!.toLowerCase(), serial: `SN${(i * 7919) % 1_000_003}` });
        // Tags first: the asset's insert then writes its row of the q text index once (migration 013),
        // where each tag after it would rewrite that row.
        insertTag.run(tagId++, orgId, 'rfid', rfidValue(id), id, created);
        if (i % 3 === 0) insertTag.run(tagId++, orgId, 'barcode', `BC${id}`, id, created);
        insertAsset.run(
          id,
          orgId,
          assetKey(id),
          name,
          i % 2 === 0 ? `Asset number ${i}` : null,
          random() < 0.9 ? 1 : 0,
          metadata,
          validFrom,
          created,
          created,
        );
      }
    })();
  }
  db.pragma('wal_checkpoint(TRUNCATE)');
  db.close();

  const leaves = wideIds.filter((_, w) => w * WIDE_FANOUT + 1 >= wideIds.length);
  return {
    size: sizeName,
    orgId,
    shardFile,
    assets: { first: assetIds.start, count: size.assets },
    locations: { first: locationIds.start, count: size.locations },
    deepBranch,
    subtreeRoots: wideIds.slice(0, Math.min(wideIds.length, 1 + WIDE_FANOUT)),
    scanLocations: leaves.slice(0, 200).map((id) => ({ id, external_key: locationKey(id) })),
    historyRows: 0,
    scannedAssets: 0,
    parkedRound: 0,
    seconds: { masterData: Math.round(performance.now() - started) / 1000, history: 0 },
    notes: [],
  };
}
