import { spawn } from 'node:child_process';
import { jetstreamManager } from '@nats-io/jetstream';
import t from 'tap';
import { CorpusWorld, CS463_CORPUS, metricSum } from '../helpers/readers.js';
import { natsClient } from '../helpers/scans.js';
import { BIN, eventually, startNats, spawnTrackd } from '../helpers/trackd.js';

t.test('trackd killed (SIGKILL) in the middle of a replay and restarted: the result is exactly what the file implies', async (t) => {
  const nats = await startNats(t, { mqtt: true });
  const trackd = await spawnTrackd(t, { natsUrl: nats.url });
  const org = await trackd.createOrg('Restart Org');
  const world = new CorpusWorld(trackd, (await trackd.createKey(org.id, ['tracking:read'])).token);
  await world.seed((await trackd.createKey(org.id)).token);

  const replay = spawn(process.execPath, [BIN, 'readers', 'replay', CS463_CORPUS, '--org', String(org.id), '--rate', '1500'], {
    env: { ...process.env, ...trackd.env, MQTT_URL: `mqtt://127.0.0.1:${nats.mqttPort}` },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  replay.stdout.on('data', (d: Buffer) => (output += d.toString()));
  replay.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const replayed = new Promise<number | null>((resolve) => replay.once('close', resolve));

  const appliedBeforeKill = await eventually(
    async () => {
      const n = await metricSum(trackd, 'trackd_scans_applied_total', 'stream="READERS"');
      return n >= 100 ? n : undefined;
    },
    30_000,
    10,
  );
  await trackd.stop('SIGKILL');
  t.ok(appliedBeforeKill < 2521, `killed after ${appliedBeforeKill} of 2521 messages`);
  await trackd.restart();
  t.equal(await replayed, 0, `the replay went on while trackd was down: ${output.trim()}`);
  t.match(JSON.parse(output), { messages: 2521 });

  const jsm = await jetstreamManager(await natsClient(t, nats.url));
  await eventually(async () => {
    const info = await jsm.consumers.info('READERS', 'trackd-readers');
    return info.num_pending === 0 && info.num_ack_pending === 0 && info.delivered.stream_seq === 2521;
  }, 30_000);
  const redelivered = await metricSum(trackd, 'trackd_scans_redelivered_total', 'stream="READERS"');
  t.comment(`after the restart: ${redelivered} messages redelivered that were committed but not acked before the kill`);
  const view = await world.snapshot();
  const mismatches = world.mismatches(view);
  t.same(mismatches.report, [], 'per EPC: location and asset_last_seen are those of its latest read');
  t.same(mismatches.history, [], 'per EPC: the history holds the visits the file implies: nothing lost, nothing applied twice');

  // Every message delivered again after its effects were committed: the durable consumer is gone,
  // so the restarted trackd re-creates it at stream sequence 1.
  await trackd.stop();
  await jsm.consumers.delete('READERS', 'trackd-readers');
  await trackd.restart();
  await eventually(async () => (await metricSum(trackd, 'trackd_scans_redelivered_total', 'stream="READERS"')) === 2521, 30_000);
  t.equal(await metricSum(trackd, 'trackd_scans_applied_total', 'stream="READERS"'), 0, 'no redelivered message applied again');
  t.equal(await metricSum(trackd, 'trackd_scans_dead_lettered_total', 'stream="READERS"'), 0);
  t.same(await world.snapshot(), view, 'report and history unchanged by the redelivery of all 2,521 messages (3,784 reads)');
});
