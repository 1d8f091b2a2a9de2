/**
 * One node's lease manager as a process of its own (the lease test SIGSTOPs it): NATS_URL, NODE_ID,
 * SHARDS, LEASE_MS from the environment; every lease event printed as a JSON line.
 */
import { LeaseBucket } from '../../src/cluster/leaseBucket.js';
import { LeaseManager } from '../../src/cluster/leases.js';
import { answerPresence, probePresence } from '../../src/cluster/presence.js';
import { connectNats } from '../../src/scans/streams.js';

const leaseMs = Number(process.env.LEASE_MS);
const nc = await connectNats(process.env.NATS_URL!, `lease-${process.env.NODE_ID}`, { reconnect: true });
const bucket = await LeaseBucket.open(nc, 1, Math.max(100, Math.floor(leaseMs / 3)));
// As ShardOwnership does: this node answers presence probes, and probes the other holders.
answerPresence(nc, process.env.NODE_ID!);
const manager = new LeaseManager(
  bucket,
  {
    nodeId: process.env.NODE_ID!,
    shards: Number(process.env.SHARDS),
    leaseMs,
    probe: (node) => probePresence(nc, node, 300),
    absentMs: process.env.ABSENT_MS === undefined ? undefined : Number(process.env.ABSENT_MS),
    settleMs: process.env.SETTLE_MS === undefined ? undefined : Number(process.env.SETTLE_MS),
  },
  (event) => process.stdout.write(`${JSON.stringify({ ...event, at: Date.now() })}\n`),
);
manager.start();
process.on('SIGTERM', async () => {
  await manager.stop();
  await nc.close();
  process.exit(0);
});
