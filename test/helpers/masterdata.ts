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
    const res = await trackd.request('POST', '/api/v1/locations', {
      token,
      body: { external_key: l.external_key, name: l.name ?? l.external_key, tags: tagBody(l.tags) },
    });
    if (res.status !== 201 && res.status !== 200) throw new Error(`POST /api/v1/locations ${res.status}: ${res.text}`);
    out.locations[l.external_key] = res.json.data.id;
  }
  for (const a of spec.assets) {
    const res = await trackd.request('POST', '/api/v1/assets', {
      token,
      body: { external_key: a.external_key, name: a.name ?? a.external_key, tags: tagBody(a.tags) },
    });
    if (res.status !== 201 && res.status !== 200) throw new Error(`POST /api/v1/assets ${res.status}: ${res.text}`);
    out.assets[a.external_key] = res.json.data.id;
  }
  return out;
}
