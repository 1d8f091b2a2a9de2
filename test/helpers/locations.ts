import { startTrackd, type HttpResult, type RequestOptions, type StartOptions, type Teardown, type Trackd } from './trackd.js';

/** One trackd with one organization and an all-scopes key, plus shorthands for the location API. */
export interface LocationsClient {
  trackd: Trackd;
  orgId: number;
  token: string;
  req(method: string, path: string, body?: unknown, options?: RequestOptions): Promise<HttpResult>;
  /** POST /api/v1/locations expecting 201; returns the view. */
  create(body: Record<string, unknown>): Promise<any>;
  /** A client for another organization on the same server. */
  otherOrg(name?: string): Promise<LocationsClient>;
}

async function client(trackd: Trackd, orgName: string): Promise<LocationsClient> {
  const org = await trackd.createOrg(orgName);
  const { token } = await trackd.createKey(org.id);
  const self: LocationsClient = {
    trackd,
    orgId: org.id,
    token,
    req: (method, path, body, options = {}) => trackd.request(method, path, { token, ...options, ...(body === undefined ? {} : { body }) }),
    async create(body) {
      const res = await self.req('POST', '/api/v1/locations', body);
      if (res.status !== 201) throw new Error(`create ${JSON.stringify(body)} gave ${res.status}: ${res.text}`);
      return res.json.data;
    },
    otherOrg: (name = 'Other Org') => client(trackd, name),
  };
  return self;
}

export async function startLocations(t: Teardown, orgName = 'Locations Org', options: StartOptions = {}): Promise<LocationsClient> {
  const trackd = await startTrackd(t, options);
  return client(trackd, orgName);
}

/** The (field, code) pairs of a validation_error, in order. */
export function fieldCodes(res: HttpResult): Array<[string, string]> {
  return (res.json?.error?.fields ?? []).map((f: { field: string; code: string }) => [f.field, f.code]);
}

let counter = 0;
/** A fresh external key for a test. */
export function key(prefix = 'K'): string {
  counter++;
  return `${prefix}-${process.pid}-${counter}`;
}
