/**
 * A journaled shard whose broker goes away (docs/cluster.md, "Failures other than fencing"): writes
 * answer 503 while it is away, reads go on, and once it is back the shard reconciles with its
 * journal and takes writes again; the shard then still equals its rebuild from the journal.
 */
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { startNatsServer } from '../../src/nats/embedded.js';
import { rebuildShard } from '../../src/shards/replay.js';
import { firstDifference, tables } from '../helpers/shardWorkload.js';
import { eventually, startNats, startTrackd, tempDir } from '../helpers/trackd.js';

t.test('broker away under a journaled shard: 503 while away, writes again once it is back, journal and shard still agree', async (t) => {
  const nats = await startNats(t);
  const trackd = await startTrackd(t, { natsUrl: nats.url, env: { SHARD_JOURNAL: 'on', SHARDS: '1', HTTP_THREADS: '1' } });
  const org = await trackd.createOrg('Away');
  const { token } = await trackd.createKey(org.id);
  const create = (name: string) => trackd.request('POST', '/api/v1/assets', { token, body: { name } });
  t.equal((await create('Before')).status, 201, 'a write with the broker up');

  await nats.stop();
  const away = await create('While away');
  t.equal(away.status, 503, 'a write while the broker is away is refused');
  t.equal(away.json?.error?.type, 'service_unavailable', 'as service_unavailable');
  t.ok(away.headers.get('retry-after'), 'with Retry-After');
  const list = await trackd.request('GET', '/api/v1/assets', { token });
  t.equal(list.status, 200, 'reads go on');

  const again = await startNatsServer({ storeDir: nats.storeDir, port: nats.port, serverName: 'back' });
  t.teardown(() => again.stop());
  const after = await eventually(async () => {
    const res = await create('After');
    return res.status === 201 ? res : undefined;
  }, 30_000);
  t.equal(after.status, 201, 'writes are taken again once the broker is back');
  t.ok(
    trackd.logs().some((l) => l.msg === 'shard journal recovered'),
    'the shard reopened its writer and reconciled with its journal',
  );
  const names = (await trackd.request('GET', '/api/v1/assets?sort=created_at', { token })).json.data.map((a: { name: string }) => a.name);
  t.same(
    names.filter((n: string) => n !== 'While away'),
    ['Before', 'After'],
    `the writes before and after are there once (${JSON.stringify(names)})`,
  );

  const dir = tempDir('trackd-rebuild-');
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const rebuilt = path.join(dir, 'shard-0.sqlite');
  await rebuildShard(rebuilt, { natsUrl: again.url, replicas: 1 }, 0, { fromSnapshot: false });
  t.equal(
    firstDifference(tables(path.join(trackd.dataDir, 'shards', 'shard-0.sqlite')), tables(rebuilt)),
    undefined,
    'the shard equals its rebuild from the journal, table by table',
  );
});
