/**
 * What a scan batch costs the shard's thread to receive (structured clone over its port): one
 * object per read (the plain arguments) against the columns the consumer now sends
 * (`packBatch`), deserialized and unpacked as the worker does. CPU of this thread, alternating,
 * per batch of 300 messages of 50 reads. Prints one JSON document.
 *
 *   node dist/bench/probes/batchWire.js [--messages 300] [--reads 50] [--rounds 6] [--repeat 30]
 */
import v8 from 'node:v8';
import { parseArgs } from 'node:util';
import { packBatch, unpackBatch } from '../../src/scans/apply.js';
import type { SourcedScan } from '../../src/scans/canonical.js';

const { values } = parseArgs({
  options: {
    messages: { type: 'string', default: '300' },
    reads: { type: 'string', default: '50' },
    rounds: { type: 'string', default: '6' },
    repeat: { type: 'string', default: '30' },
  },
});
const messages = Number(values.messages);
const reads = Number(values.reads);
const items: SourcedScan[] = Array.from({ length: messages }, (_, m) => ({
  scan: {
    orgId: 1,
    eventId: `field-${m}-0000000000`,
    observedAt: 1_795_680_000_000 + m,
    location: { externalKey: `LOC-${m % 200}` },
    reads: Array.from({ length: reads }, (_, i) => ({
      tagType: 'epc',
      value: `3034F8A1C2000000${String(m * reads + i).padStart(8, '0')}`,
    })),
  },
  stream: 'SCANS',
  seq: m + 1,
}));
const args = { items, options: { historyGapMs: 300_000 } };
const cpuMs = (run: () => void, repeat: number) => {
  const start = process.cpuUsage();
  for (let i = 0; i < repeat; i++) run();
  const used = process.cpuUsage(start);
  return (used.user + used.system) / 1000 / repeat;
};
const plain = v8.serialize(args);
const packed = v8.serialize(packBatch(args));
const rounds: { objects_ms: number; columns_unpacked_ms: number }[] = [];
for (let r = 0; r < Number(values.rounds); r++) {
  rounds.push({
    objects_ms: cpuMs(() => v8.deserialize(plain), Number(values.repeat)),
    columns_unpacked_ms: cpuMs(() => unpackBatch(v8.deserialize(packed)), Number(values.repeat)),
  });
}
process.stdout.write(
  `${JSON.stringify({ messages, reads_per_message: reads, bytes: { objects: plain.length, columns: packed.length }, cpu_ms_per_batch: rounds }, null, 1)}\n`,
);
