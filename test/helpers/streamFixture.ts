/** The setting the stream tests share: trackd with 1 s slow-client limit on two HTTP threads, two orgs, scans. */
import type { Test } from 'tap';
import { drained, natsClient, publish, scanBody } from './scans.js';
import { startTrackd } from './trackd.js';

export async function streamFixture(t: Test, prefix: string) {
  const trackd = await startTrackd(t, { env: { EVENT_STREAM_SLOW_SECONDS: '1', HTTP_THREADS: '2' } });
  const org = await trackd.createOrg(`${prefix} Org`);
  const other = await trackd.createOrg(`Other ${prefix} Org`);
  const admin = (await trackd.createKey(org.id)).token;
  const nc = await natsClient(t, trackd.natsUrl);
  const post = async (path: string, body: unknown, token = admin) => {
    const res = await trackd.http('POST', path, { token, body });
    if (res.status !== 201 && res.status !== 200) throw new Error(`${path}: ${res.status} ${res.text}`);
    return res.json.data;
  };
  const base = Date.now() - 3_600_000;
  let minute = 0;
  /** A scan, applied before the next step (so that its event's place among HTTP writes is known). */
  const scan = async (loc: string, tag: string) => {
    await publish(nc, `scans.${org.id}.fixed`, scanBody(loc, [`rfid:${tag}`], new Date(base + ++minute * 60_000)));
    await drained(nc);
  };
  return { trackd, org, other, admin, nc, post, scan };
}
