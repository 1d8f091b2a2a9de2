import { performance } from 'node:perf_hooks';
import { jetstreamManager } from '@nats-io/jetstream';
import t from 'tap';
import { CorpusWorld, CS463_CORPUS, metricSum } from '../helpers/readers.js';
import { natsClient } from '../helpers/scans.js';
import { eventually, startTrackd } from '../helpers/trackd.js';

const READERS = 'stream="READERS"';

t.test(
  'the CS463 capture replayed over MQTT into the embedded nats-server gives the locations and visits the file implies; a second replay changes nothing',
  async (t) => {
    const trackd = await startTrackd(t, { natsUrl: 'embedded' });
    const org = await trackd.createOrg('Reader Org');
    const world = new CorpusWorld(trackd, (await trackd.createKey(org.id, ['tracking:read'])).token);
    t.equal(world.corpus.messages, 2521);
    t.equal(world.epcs.length, 71);
    await world.seed((await trackd.createKey(org.id)).token);

    const started = performance.now();
    const summary = await trackd.cli(['readers', 'replay', CS463_CORPUS, '--org', String(org.id)]);
    t.match(summary, { messages: 2521, reads: world.corpus.reads.length, seconds: Number, rate: Number });
    await eventually(async () => (await metricSum(trackd, 'trackd_scans_applied_total', READERS)) === 2521, 30_000, 20);
    const allApplied = Date.now();
    const seconds = (performance.now() - started) / 1000;
    const jsm = await jetstreamManager(await natsClient(t, trackd.natsUrl));
    const firstStored = Date.parse((await jsm.streams.getMessage('READERS', { seq: 1 }))!.timestamp);
    const fromFirst = (allApplied - firstStored) / 1000;
    t.comment(
      `replay: first message stored in READERS until all applied ${fromFirst.toFixed(2)} s = ${Math.round(2521 / fromFirst)} messages/s, ${Math.round(world.corpus.reads.length / fromFirst)} reads/s; ` +
        `CLI start until all applied ${seconds.toFixed(2)} s; the CLI's own figure ${summary.seconds} s (${summary.rate} messages/s)`,
    );
    t.equal(
      await metricSum(trackd, 'trackd_scan_reads_applied_total', READERS),
      world.corpus.reads.length,
      'every read resolved to an asset',
    );
    t.equal(await metricSum(trackd, 'trackd_scans_dead_lettered_total', READERS), 0);
    t.equal(await metricSum(trackd, 'trackd_scans_applied_total', 'reader="cs463-212"'), 1804, 'metrics per reader');
    t.equal(await metricSum(trackd, 'trackd_scans_applied_total', 'reader="cs463-214"'), 717);

    const first = await world.snapshot();
    t.equal(first.report.length, 71);
    const mismatches = world.mismatches(first);
    t.same(mismatches.report, [], 'per EPC: location and asset_last_seen are those of its latest read');
    t.same(mismatches.history, [], `per EPC: the history holds the visits the file implies (${world.visitCount()} in all)`);

    const again = await trackd.cli(['readers', 'replay', CS463_CORPUS, '--org', String(org.id)]);
    t.equal(again.messages, 2521);
    await eventually(async () => (await metricSum(trackd, 'trackd_scans_duplicate_total', READERS)) === 2521, 30_000, 20);
    t.equal(await metricSum(trackd, 'trackd_scans_applied_total', READERS), 2521, 'the second replay applied nothing');
    t.same(await world.snapshot(), first, 'report and history are unchanged');
  },
);
