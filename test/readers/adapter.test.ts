import fs from 'node:fs';
import path from 'node:path';
import { connectAsync } from 'mqtt';
import t from 'tap';
import { cs463, cs463EventId } from '../../src/readers/cs463.js';
import { READER_FORMATS } from '../../src/readers/registry.js';
import { readersSource } from '../../src/readers/source.js';
import { splitCredentials } from '../../src/scans/streams.js';
import { seed } from '../helpers/masterdata.js';
import { CS463_CORPUS, metricSum } from '../helpers/readers.js';
import { deadLetters, natsClient } from '../helpers/scans.js';
import { eventually, startTrackd } from '../helpers/trackd.js';

const NOW = Date.parse('2026-11-22T00:00:00Z');
const context = { orgId: 7, readerName: 'cs463-212', now: NOW };
const lines = fs
  .readFileSync(CS463_CORPUS, 'utf8')
  .split('\n')
  .filter((l) => l.trim() !== '');
const payloads = lines.map((l) => l.slice(l.indexOf('\t') + 1));
const firstPayload = payloads[0]!;
const bytes = (text: string) => new TextEncoder().encode(text);
const decode = (body: unknown) => cs463.decode(bytes(typeof body === 'string' ? body : JSON.stringify(body)), context);

t.test(
  'every corpus line becomes one scan per tag read: (rfid, epc) at the capture point, at timeStampOfRead in ms, with an event id from the reading',
  async (t) => {
    const ids = new Set<string>();
    let reads = 0;
    for (const payload of payloads) {
      const body = JSON.parse(payload);
      const decoded = cs463.decode(bytes(payload), context);
      if (!('scans' in decoded)) throw new Error(`corpus line dead: ${JSON.stringify(decoded)}`);
      t.equal(decoded.scans.length, body.tags.length);
      decoded.scans.forEach((scan, i) => {
        const tag = body.tags[i];
        reads++;
        ids.add(scan.eventId);
        if (scan.observedAt !== Math.floor(tag.timeStampOfRead / 1000) || scan.reads[0]!.value !== tag.epc || scan.orgId !== 7)
          t.fail(`line mismatch: ${payload}`);
        if ((scan.location as { keyOrTagValue: string }).keyOrTagValue !== tag.capturePointName)
          t.fail(`capture point mismatch: ${payload}`);
        if (scan.eventId.length > 64) t.fail(`event id too long: ${scan.eventId}`);
      });
    }
    t.equal(reads, 3784);
    t.equal(ids.size, 3784, 'distinct readings get distinct event ids');
    const first = cs463.decode(bytes(firstPayload), context) as { scans: any[] };
    t.same(first.scans[0].reads, [{ tagType: 'rfid', value: '000000000000000000010023' }]);
    t.equal(first.scans[0].observedAt, 1779715091335);
    t.same(
      cs463.decode(bytes(firstPayload), { ...context, orgId: 8, readerName: 'other' }),
      { scans: first.scans.map((s) => ({ ...s, orgId: 8 })) },
      'the same reading decodes to the same event id (a replay is a no-op)',
    );
  },
);

t.test('the event id changes with each part of the reading and nothing else', async (t) => {
  const base = cs463EventId('cs463-212', 'E280', 1, 1779715091335000);
  t.match(base, /^cs463-[A-Za-z0-9_-]{43}$/);
  t.not(cs463EventId('cs463-214', 'E280', 1, 1779715091335000), base);
  t.not(cs463EventId('cs463-212', 'E281', 1, 1779715091335000), base);
  t.not(cs463EventId('cs463-212', 'E280', 2, 1779715091335000), base);
  t.not(cs463EventId('cs463-212', 'E280', 1, 1779715091335001), base);
  const body = JSON.parse(firstPayload);
  const withOtherRssi = { ...body, sequenceNumber: 99, tags: [{ ...body.tags[0], rssi: '-10', timeZone: '+1:00' }] };
  t.equal((decode(withOtherRssi) as { scans: any[] }).scans[0].eventId, (decode(body) as { scans: any[] }).scans[0].eventId);
});

t.test('malformed payloads are dead with a reason that says what is wrong', async (t) => {
  const tag = JSON.parse(firstPayload).tags[0];
  const cases: [string, unknown, string, RegExp][] = [
    ['not JSON', '{"rfidReaderName":', 'invalid_json', /not valid JSON/],
    ['not UTF-8', new Uint8Array([0xff, 0xfe]), 'invalid_json', /not valid JSON/],
    ['a JSON array', '[1,2]', 'invalid_body', /JSON object/],
    ['no tags', { rfidReaderName: 'r' }, 'invalid_body', /tags/],
    ['no reader name', { tags: [tag] }, 'invalid_body', /rfidReaderName/],
    ['epc not a string', { rfidReaderName: 'r', tags: [{ ...tag, epc: 42 }] }, 'invalid_body', /tags\[0\]\.epc/],
    [
      'timestamp as text',
      { rfidReaderName: 'r', tags: [{ ...tag, timeStampOfRead: '1779715091335000' }] },
      'invalid_body',
      /tags\[0\]\.timeStampOfRead/,
    ],
    [
      'fractional timestamp',
      { rfidReaderName: 'r', tags: [{ ...tag, timeStampOfRead: 1.5 }] },
      'invalid_body',
      /tags\[0\]\.timeStampOfRead/,
    ],
    [
      'empty capture point',
      { rfidReaderName: 'r', tags: [tag, { ...tag, capturePointName: '' }] },
      'invalid_body',
      /tags\[1\]\.capturePointName/,
    ],
    [
      'antenna missing',
      { rfidReaderName: 'r', tags: [{ epc: 'E1', timeStampOfRead: 1, capturePointName: 'c' }] },
      'invalid_body',
      /tags\[0\]\.antennaPort/,
    ],
    [
      'a read an hour ahead of the clock',
      { rfidReaderName: 'r', tags: [{ ...tag, timeStampOfRead: (NOW + 3_600_000) * 1000 }] },
      'future_observed_at',
      /ahead of the server clock/,
    ],
  ];
  for (const [name, body, reason, detail] of cases) {
    const decoded = body instanceof Uint8Array ? cs463.decode(body, context) : decode(body);
    t.match(decoded, { dead: { reason, detail } }, name);
  }
  t.same(decode({ rfidReaderName: 'r', tags: [] }), { scans: [] }, 'a message without tag reads is no scan, not an error');
});

t.test('the format registry and the READERS subject route', async (t) => {
  t.equal(READER_FORMATS.get('cs463'), cs463);
  t.match(readersSource.route('readers.12.cs463.dock-reader'), {
    orgId: 12,
    orgToken: '12',
    labels: { format: 'cs463', reader: 'dock-reader' },
  });
  t.match(readersSource.route('readers.12.zebra.r1'), {
    orgToken: '12',
    dead: { reason: 'unknown_reader_format', detail: /"zebra" is not one of: cs463/ },
  });
  for (const subject of ['readers.12.cs463', 'readers.0.cs463.r', 'readers.x.cs463.r', 'readers.12.cs463.r.extra']) {
    t.match(readersSource.route(subject), { dead: { reason: 'invalid_subject' } }, subject);
  }
});

t.test(
  'over MQTT: unknown capture points, malformed payloads, unknown formats and orgs are dead-lettered with reasons; the rest of a message applies',
  async (t) => {
    const trackd = await startTrackd(t, { natsUrl: 'embedded' });
    const org = await trackd.createOrg('Dead Letters');
    const token = (await trackd.createKey(org.id)).token;
    const ids = await seed(trackd, token, {
      locations: [{ external_key: 'cs463-212-1' }],
      assets: [{ external_key: 'KNOWN', tags: ['rfid:E-KNOWN'] }],
    });
    const mqttUrl = fs.readFileSync(path.join(trackd.dataDir, 'mqtt.url'), 'utf8').trim();
    const client = await connectAsync(mqttUrl, { clientId: 'dead-letter-test', reconnectPeriod: 0 });
    t.teardown(() => client.endAsync());
    const nc = await natsClient(t, trackd.natsUrl);
    const at = Date.now() * 1000;
    const read = (epc: string, capturePointName: string) => ({
      epc,
      timeStampOfRead: at,
      timeZone: '-6:00',
      antennaPort: 1,
      capturePointName,
      rssi: '-60',
    });
    const mixed = {
      rfidReaderName: 'dock-reader',
      sequenceNumber: 0,
      numberOfTags: 2,
      tags: [read('E-KNOWN', 'cs463-212-1'), read('E-KNOWN', 'cs463-999-9')],
    };
    await client.publishAsync(`readers/${org.id}/cs463/dock-reader`, JSON.stringify(mixed), { qos: 1 });
    await client.publishAsync(`readers/${org.id}/cs463/dock-reader`, '{"tags": nope', { qos: 1 });
    await client.publishAsync(`readers/${org.id}/zebra/dock-reader`, JSON.stringify(mixed), { qos: 0 });
    await client.publishAsync('readers/999999/cs463/dock-reader', JSON.stringify(mixed), { qos: 1 });

    const dead = await eventually(async () => {
      const all = await deadLetters(nc);
      return all.length >= 4 ? all : undefined;
    }, 10_000);
    t.equal(dead.length, 4, 'one dead letter per message');
    const byReason = Object.fromEntries(dead.map((d) => [d.reason, d]));
    t.match(byReason.unknown_location, { subject: `scans_dead.${org.id}`, detail: /capture point "cs463-999-9"/ });
    t.notMatch(byReason.unknown_location.detail, /cs463-212-1/, 'the known capture point is not a reason');
    t.same(JSON.parse(byReason.unknown_location.data), mixed, 'the dead letter is the original payload');
    t.match(byReason.invalid_json, { subject: `scans_dead.${org.id}`, data: '{"tags": nope' });
    t.match(byReason.unknown_reader_format, { detail: /"zebra"/ });
    t.match(byReason.unknown_org, { subject: 'scans_dead.999999' });

    const row = await eventually(async () => {
      const res = await trackd.request('GET', `/api/v1/reports/asset-locations?asset_id=${ids.assets.KNOWN}`, { token });
      return res.json.data[0];
    });
    t.match(
      row,
      { location_external_key: 'cs463-212-1', asset_last_seen: new Date(Math.floor(at / 1000)).toISOString() },
      'the resolvable read of the mixed message applied',
    );
    t.equal(
      await metricSum(
        trackd,
        'trackd_scans_dead_lettered_total',
        'reason="unknown_location",stream="READERS",format="cs463",reader="dock-reader"',
      ),
      1,
      'dead letters are counted per reader',
    );
    t.equal(
      await metricSum(
        trackd,
        'trackd_scans_dead_lettered_total',
        'reason="invalid_json",stream="READERS",format="cs463",reader="dock-reader"',
      ),
      1,
    );
    t.equal(await metricSum(trackd, 'trackd_scan_reads_applied_total', 'reader="dock-reader"'), 1);
    t.equal((await trackd.request('GET', '/readyz')).status, 200, 'ready with both consumers');
  },
);

t.test(
  'NATS_URL credentials (nats://user:pass@host, as deploy/nats-server.conf needs) are passed to nats.js, which ignores them in URLs',
  async (t) => {
    t.same(splitCredentials('nats://trackd:s%40cret@nats-host:7422'), {
      servers: ['nats://nats-host:7422'],
      user: 'trackd',
      pass: 's@cret',
    });
    t.same(splitCredentials('nats://tok@a:7422, nats://b:7422'), {
      servers: ['nats://a:7422', 'nats://b:7422'],
      user: 'tok',
      pass: undefined,
    });
    t.same(splitCredentials('127.0.0.1:7422'), { servers: ['127.0.0.1:7422'], user: undefined, pass: undefined });
  },
);
