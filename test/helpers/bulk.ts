import { eventually, type HttpResult, type Trackd } from './trackd.js';

/** An import over the wire (its Content-Type from the format), answered 202 or an error envelope. */
export function postImport(
  trackd: Trackd,
  token: string,
  kind: 'assets' | 'locations',
  body: string | Buffer,
  options: { format?: 'csv' | 'ndjson'; query?: string; headers?: Record<string, string>; viaSocket?: boolean; timeoutMs?: number } = {},
): Promise<HttpResult> {
  const contentType = (options.format ?? 'csv') === 'csv' ? 'text/csv' : 'application/x-ndjson';
  const url = `/api/v1/${kind}/bulk${options.query === undefined ? '' : `?${options.query}`}`;
  const send = options.viaSocket ? trackd.http : trackd.request;
  return send('POST', url, { token, body, contentType, headers: options.headers });
}

/** Polls a job until it is no longer processing; returns its status document. */
export async function settledJob(
  trackd: Trackd,
  token: string,
  kind: 'assets' | 'locations',
  jobId: string,
  timeoutMs = 20_000,
): Promise<any> {
  return eventually(async () => {
    const res = await trackd.request('GET', `/api/v1/${kind}/bulk/${jobId}`, { token });
    if (res.status !== 200) throw new Error(`job status ${res.status}: ${res.text}`);
    const job = res.json.data;
    return job.status === 'completed' || job.status === 'failed' ? job : undefined;
  }, timeoutMs);
}

/** Posts an import expecting 202 and waits for its job to settle. */
export async function runImport(
  trackd: Trackd,
  token: string,
  kind: 'assets' | 'locations',
  body: string | Buffer,
  options: Parameters<typeof postImport>[4] = {},
): Promise<any> {
  const res = await postImport(trackd, token, kind, body, options);
  if (res.status !== 202) throw new Error(`import: ${res.status} ${res.text}`);
  return settledJob(trackd, token, kind, res.json.job_id, options.timeoutMs);
}
