import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import Database from 'better-sqlite3';
import { seed } from '../helpers/masterdata.js';
import { deadLetters, delivered, drained, natsClient, publish, scanBody } from '../helpers/scans.js';
import { envelopeProblems } from '../helpers/hostile.js';
import { eventually, spawnTrackd, tempDir } from '../helpers/trackd.js';

/**
 * The data directory fills up while trackd serves and ingests: writes answer 503 with the envelope
 * (never a 500), /readyz says 503, reads keep working, scans wait (never dead-lettered), and when space
 * returns everything recovers with nothing lost and the SQLite files intact.
 *
 * A full disk needs a small file system: a tmpfs mounted for the test (root). Without the right to
 * mount, the same checks run against a data directory made read-only with chmod (non-root only).
 */

function tryMount(dir: string, sizeMiB: number): boolean {
  return spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${sizeMiB}m`, 'tmpfs', dir], { stdio: 'ignore' }).status === 0;
}

function fill(dir: string): string {
  const file = path.join(dir, 'filler.bin');
  const fd = fs.openSync(file, 'w');
  const chunk = Buffer.alloc(256 * 1024, 1);
  try {
    for (;;) fs.writeSync(fd, chunk);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
  }
  // Top up the last partial block too.
  try {
    for (;;) fs.writeSync(fd, Buffer.alloc(512, 1));
  } catch {
    // full
  } finally {
    fs.closeSync(fd);
  }
  return file;
}

t.test('data directory full: clear 503s, readiness 503, no loss, no corruption, recovery when space returns', async (t) => {
  const mnt = tempDir('trackd-small-fs-');
  const mounted = tryMount(mnt, 24);
  const isRoot = process.getuid?.() === 0;
  t.teardown(() => {
    if (mounted) spawnSync('umount', ['-l', mnt], { stdio: 'ignore' });
    fs.rmSync(mnt, { recursive: true, force: true });
  });
  t.comment(
    mounted
      ? 'data directory on a 24 MiB tmpfs'
      : isRoot
        ? 'cannot mount a tmpfs here (and chmod does not bind root)'
        : 'no mount right: read-only data directory by chmod',
  );
  t.ok(mounted || !isRoot, 'a way to make the data directory refuse writes: a small tmpfs (root) or chmod (non-root)');
  if (!mounted && isRoot) return;

  const dataDir = path.join(mnt, 'data');
  const trackd = await spawnTrackd(t, { dataDir, env: { HISTORY_GAP_SECONDS: '0', SHARDS: '1' } });
  const org = await trackd.createOrg('Storage');
  const token = (await trackd.createKey(org.id)).token;
  const ids = await seed(trackd, token, {
    locations: [{ external_key: 'DOCK-1' }],
    assets: [{ external_key: 'PALLET-1', tags: ['rfid:E1'] }],
  });
  const nc = await natsClient(t, trackd.natsUrl);
  const history = async () =>
    (await trackd.request('GET', `/api/v1/assets/${ids.assets['PALLET-1']}/history?limit=1`, { token })).json?.total_count;
  const base = Date.now() - 3_600_000;
  let published = 0;
  const publishScans = async (n: number) => {
    for (let i = 0; i < n; i++, published++)
      await publish(nc, `scans.${org.id}.fixed`, scanBody('DOCK-1', ['rfid:E1'], new Date(base + published * 1000)));
  };
  await publishScans(10);
  await eventually(async () => (await history()) === 10, 10_000);

  // Take the space (or the write permission) away.
  let filler: string | undefined;
  const chmodded: string[] = [];
  if (mounted) filler = fill(mnt);
  else {
    for (const f of [
      path.join(dataDir, 'shards'),
      ...fs.readdirSync(path.join(dataDir, 'shards')).map((f) => path.join(dataDir, 'shards', f)),
    ]) {
      fs.chmodSync(f, 0o555);
      chmodded.push(f);
    }
  }
  const statuses: number[] = [];
  let unavailable: { status: number; headers: Headers; text: string } | undefined;
  for (let i = 0; i < 60 && unavailable === undefined; i++) {
    const res = await trackd.request('POST', '/api/v1/locations', { token, body: { name: `Full ${i}`, description: 'x'.repeat(4000) } });
    statuses.push(res.status);
    if (res.status !== 201) unavailable = res;
  }
  t.ok(unavailable !== undefined, `writes start failing once the disk is full (${statuses.length} tried)`);
  t.notOk(statuses.includes(500), 'never a 500');
  t.equal(unavailable?.status, 503, 'a write that cannot be stored is 503');
  t.same(
    envelopeProblems(unavailable!.status, unavailable!.headers, unavailable!.text, '/api/v1/locations'),
    [],
    'with the error envelope',
  );
  t.match(JSON.parse(unavailable!.text).error, { type: 'service_unavailable', detail: /full or read-only/ }, 'a clear error');
  t.equal(unavailable?.headers.get('retry-after'), '5', 'and Retry-After');
  await eventually(async () => (await trackd.request('GET', '/readyz')).status === 503, 5000);
  const ready = await trackd.request('GET', '/readyz');
  t.same(ready.json, { status: 'not_ready', storage: false, consumer: true }, '/readyz 503 names storage');
  const read = await trackd.request('GET', `/api/v1/assets/${ids.assets['PALLET-1']}`, { token });
  t.equal(read.status, 200, 'reads keep working');
  const patch = await trackd.request('PATCH', `/api/v1/assets/${ids.assets['PALLET-1']}`, {
    token,
    body: { description: 'y'.repeat(4000) },
  });
  t.ok(patch.status === 503 || patch.status === 200, `PATCH answers 503 (or fits): ${patch.status}`);

  // Scans published while full are never dead-lettered: a batch that cannot be stored waits in the
  // stream; one that still fits is applied (the background checkpointer lets SQLite reuse its
  // checkpointed WAL in place, so small batches can fit on a full disk). Exactly once either way (below).
  await publishScans(40);
  await delivered(nc);
  const whileFull = await history();
  t.ok(whileFull >= 10 && whileFull <= 50, `scans while the disk is full: waiting or applied, none twice (${whileFull} of 50 applied)`);
  t.same(await deadLetters(nc), [], 'nothing dead-lettered for lack of space');

  // Give the space back.
  if (filler) fs.rmSync(filler);
  for (const f of chmodded) fs.chmodSync(f, 0o755);
  await eventually(async () => (await trackd.request('GET', '/readyz')).status === 200, 10_000, 200);
  t.equal((await trackd.request('GET', '/readyz')).status, 200, 'ready again once space returns');
  await drained(nc);
  t.equal(await history(), 50, 'every scan published before, during and after is applied exactly once');
  const after = await trackd.request('POST', '/api/v1/locations', { token, body: { name: 'After' } });
  t.equal(after.status, 201, 'writes work again');
  const metrics = await trackd.request('GET', '/metrics');
  t.notMatch(metrics.text, /status="500"/, 'no 500 at any point');

  t.equal(await trackd.stop(), 0, 'clean shutdown');
  for (const file of [path.join(dataDir, 'control.sqlite'), path.join(dataDir, 'shards', 'shard-0.sqlite')]) {
    const db = new Database(file, { readonly: true });
    t.equal(db.pragma('integrity_check', { simple: true }), 'ok', `${path.basename(file)}: integrity_check ok`);
    db.close();
  }
});
