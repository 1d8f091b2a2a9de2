import { startTrackd, type HttpResult, type RequestOptions, type Teardown, type Trackd } from './trackd.js';

export { fieldCodes, key } from './locations.js';

/** One organization's view of a trackd: an all-scopes key plus shorthands for the asset API. */
export interface AssetsClient {
  trackd: Trackd;
  orgId: number;
  token: string;
  req(method: string, path: string, body?: unknown, options?: RequestOptions): Promise<HttpResult>;
  /** POST /api/v1/assets expecting 201; returns the view. */
  create(body: Record<string, unknown>): Promise<any>;
  /** POST /api/v1/assets/{id}/tags expecting 201; returns the tag. */
  attach(assetId: number, tag: { tag_type: string; value: string }): Promise<any>;
  /** An API key of this organization with the given scopes. */
  key(scopes: string[]): Promise<string>;
  /** A client for another organization on the same server. */
  otherOrg(name?: string): Promise<AssetsClient>;
}

export async function assetsClient(trackd: Trackd, orgName: string): Promise<AssetsClient> {
  const org = await trackd.createOrg(orgName);
  const { token } = await trackd.createKey(org.id);
  const self: AssetsClient = {
    trackd,
    orgId: org.id,
    token,
    req: (method, path, body, options = {}) => trackd.request(method, path, { token, ...options, ...(body === undefined ? {} : { body }) }),
    async create(body) {
      const res = await self.req('POST', '/api/v1/assets', body);
      if (res.status !== 201) throw new Error(`create ${JSON.stringify(body)} gave ${res.status}: ${res.text}`);
      return res.json.data;
    },
    async attach(assetId, tag) {
      const res = await self.req('POST', `/api/v1/assets/${assetId}/tags`, tag);
      if (res.status !== 201) throw new Error(`attach ${JSON.stringify(tag)} gave ${res.status}: ${res.text}`);
      return res.json.data;
    },
    key: async (scopes) => (await trackd.createKey(org.id, scopes)).token,
    otherOrg: async (name = 'Other Org') => assetsClient(trackd, name),
  };
  return self;
}

/**
 * Scan locations `<prefix>-L<i>` and assets `<prefix>-A<i>` (named `A<i>`), each asset carrying the
 * rfid tag `<prefix in lower case><i>`: the fixture of the scan programs that compare with SQLite.
 */
export async function scanFixture(
  api: AssetsClient,
  prefix: string,
  counts: { locations: number; assets: number },
): Promise<{ locations: string[]; assets: { id: number; tag: string }[] }> {
  const locations = Array.from({ length: counts.locations }, (_, i) => `${prefix}-L${i}`);
  for (const key of locations) await api.req('POST', '/api/v1/locations', { external_key: key, name: key });
  const assets: { id: number; tag: string }[] = [];
  for (let i = 0; i < counts.assets; i++) {
    const tag = `${prefix.toLowerCase()}${i}`;
    const a = await api.create({ external_key: `${prefix}-A${i}`, name: `A${i}`, tags: [{ tag_type: 'rfid', value: tag }] });
    assets.push({ id: a.id, tag });
  }
  return { locations, assets };
}

export async function startAssets(t: Teardown, orgName = 'Assets Org'): Promise<AssetsClient> {
  return assetsClient(await startTrackd(t), orgName);
}

/** The one validation_error entry a case expects: status 400, one fields[] entry with this field and code. */
export function oneFieldError(res: HttpResult): { status: number; type: string; fields: Array<[string, string]> } {
  return {
    status: res.status,
    type: res.json?.error?.type,
    fields: (res.json?.error?.fields ?? []).map((f: { field: string; code: string }) => [f.field, f.code]),
  };
}
