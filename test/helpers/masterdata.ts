import type { Trackd } from './trackd.js';

export interface SeedSpec {
  locations: { external_key: string; name?: string; tags?: string[] }[];
  assets: { external_key: string; name?: string; tags?: string[] }[];
}

export interface Seeded {
  locations: Record<string, number>;
  assets: Record<string, number>;
}

const tagBody = (tags: string[] = []) => tags.map((t) => ({ tag_type: t.slice(0, t.indexOf(':')), value: t.slice(t.indexOf(':') + 1) }));

/** Creates master data through the public REST API (black box). */
export async function seed(trackd: Trackd, token: string, spec: SeedSpec): Promise<Seeded> {
  const out: Seeded = { locations: {}, assets: {} };
  for (const l of spec.locations) {
    const res = await trackd.request('POST', '/api/v1/locations', { token, body: { external_key: l.external_key, name: l.name ?? l.external_key, tags: tagBody(l.tags) } });
    if (res.status !== 201 && res.status !== 200) throw new Error(`POST /api/v1/locations ${res.status}: ${res.text}`);
    out.locations[l.external_key] = res.json.data.id;
  }
  for (const a of spec.assets) {
    const res = await trackd.request('POST', '/api/v1/assets', { token, body: { external_key: a.external_key, name: a.name ?? a.external_key, tags: tagBody(a.tags) } });
    if (res.status !== 201 && res.status !== 200) throw new Error(`POST /api/v1/assets ${res.status}: ${res.text}`);
    out.assets[a.external_key] = res.json.data.id;
  }
  return out;
}

let fixtureId = 900_000;

/**
 * Test-only fallback while the master-data REST endpoints are not on main: writes rows straight
 * into the org's shard file with trackd stopped, then restarts it.
 */
export async function seedFixture(trackd: Trackd, orgId: number, spec: SeedSpec): Promise<Seeded> {
  const { default: Database } = await import('better-sqlite3');
  const path = await import('node:path');
  await trackd.stop();
  const shards = Number(trackd.env.SHARDS ?? '2');
  const db = new Database(path.join(trackd.dataDir, 'shards', `shard-${(orgId - 1) % shards}.sqlite`));
  const now = Date.now();
  const out: Seeded = { locations: {}, assets: {} };
  const tag = db.prepare('INSERT INTO tags (id, org_id, tag_type, value, asset_id, location_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)');
  const addTags = (tags: string[] | undefined, assetId: number | null, locationId: number | null) => {
    for (const t of tagBody(tags)) tag.run(fixtureId++, orgId, t.tag_type, t.value, assetId, locationId, now);
  };
  db.transaction(() => {
    for (const l of spec.locations) {
      const id = fixtureId++;
      db.prepare('INSERT INTO locations (id, org_id, external_key, name, valid_from, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)').run(id, orgId, l.external_key, l.name ?? l.external_key, now - 1000, now, now);
      addTags(l.tags, null, id);
      out.locations[l.external_key] = id;
    }
    for (const a of spec.assets) {
      const id = fixtureId++;
      db.prepare('INSERT INTO assets (id, org_id, external_key, name, valid_from, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)').run(id, orgId, a.external_key, a.name ?? a.external_key, now - 1000, now, now);
      addTags(a.tags, id, null);
      out.assets[a.external_key] = id;
    }
  })();
  db.close();
  await trackd.restart();
  return out;
}
