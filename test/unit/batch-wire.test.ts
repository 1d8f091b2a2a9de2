/**
 * A scan batch between threads (apply.ts packBatch / unpackBatch): the shard's actor gets back
 * exactly the batch the consumer sent, its reads carried as columns rather than one object each.
 */
import t from 'tap';
import v8 from 'node:v8';
import { packBatch, unpackBatch } from '../../src/scans/apply.js';
import type { SourcedScan } from '../../src/scans/canonical.js';

const batch = (): { items: SourcedScan[]; options: { historyGapMs: number; foldSlice?: number } } => ({
  items: [
    {
      scan: {
        orgId: 3,
        eventId: 'e-1',
        observedAt: 1_795_680_000_123,
        location: { externalKey: 'DOCK-1' },
        reads: [
          { tagType: 'rfid', value: 'A' },
          { tagType: 'epc', value: 'B' },
          { tagType: 'rfid', value: 'A' },
        ],
      },
      stream: 'SCANS',
      seq: 41,
    },
    { scan: { orgId: 3, eventId: 'e-2', observedAt: 1, location: { id: 7 }, reads: [] }, stream: 'SCANS', seq: 0 },
    {
      scan: { orgId: 4, eventId: 'e-3', observedAt: 2, location: { tagType: 'loc', value: 'L' }, reads: [{ tagType: 'rfid', value: 'Z' }] },
      stream: 'READERS',
      seq: 9,
    },
    {
      scan: { orgId: 4, eventId: 'e-4', observedAt: 3, location: { keyOrTagValue: 'gate' }, reads: [{ tagType: 'rfid', value: '' }] },
      stream: 'READERS',
      seq: 10,
    },
  ],
  options: { historyGapMs: 300_000, foldSlice: 7 },
});

t.test('pack, structured clone and unpack give back the batch, every read in order', async (t) => {
  const sent = batch();
  const arrived = unpackBatch(v8.deserialize(v8.serialize(packBatch(sent))));
  // As JSON: a hole left in a reads array (a read not unpacked) shows as null, which a deep compare of sparse arrays misses.
  t.equal(JSON.stringify(arrived), JSON.stringify(batch()), 'the batch as sent');
  t.strictSame(
    arrived.items.map((i) => i.scan.reads.map((r) => `${r.tagType}:${r.value}`)),
    [['rfid:A', 'epc:B', 'rfid:A'], [], ['rfid:Z'], ['rfid:']],
  );
});

t.test('the packed form carries no object per read', async (t) => {
  const packed = packBatch(batch()) as { packed: { tagTypes: unknown; values: unknown; scan: object }[] };
  t.same(packed.packed[0]!.tagTypes, ['rfid', 'epc', 'rfid']);
  t.same(packed.packed[0]!.values, ['A', 'B', 'A']);
  t.notOk('reads' in packed.packed[0]!.scan);
});
