import fs from 'node:fs';
import t from 'tap';
import { ControlPlane } from '../../src/control/controlPlane.js';
import { scanPlacement } from '../../src/scans/placement.js';
import '../../src/shards/commandIndex.js';
import { ShardGenerations } from '../../src/shards/generations.js';
import type { CommandMessage } from '../../src/shards/mailbox.js';
import { ShardWriter } from '../../src/shards/writer.js';
import { tempDir } from '../helpers/trackd.js';

/**
 * What a write costs the shard in SQLite beyond its answer (README, "Single node since the cluster
 * work"): an asset patch names in its UPDATE only the columns whose value changes, since SQLite
 * rewrites the entry of every index holding a column named in SET, changed or not. Observed with
 * TEMP triggers `AFTER UPDATE OF <column>`, which fire exactly when the column is named.
 */
const COLUMNS = ['name', 'description', 'is_active', 'metadata', 'valid_from', 'valid_to', 'updated_at'] as const;

t.test('an asset patch names in its UPDATE only the columns it changes (and updated_at)', async (t) => {
  const dir = tempDir('trackd-footprint-');
  const control = await ControlPlane.open(dir);
  const org = await control.createOrg('footprint', 1);
  const writer = await ShardWriter.open(dir, 0, control, new ShardGenerations(), { placement: scanPlacement });
  t.teardown(() => {
    writer.close();
    control.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const db = writer.writer;
  db.exec('CREATE TEMP TABLE named (column_name TEXT NOT NULL)');
  for (const column of COLUMNS)
    db.exec(
      `CREATE TEMP TRIGGER named_${column} AFTER UPDATE OF ${column} ON main.assets BEGIN INSERT INTO named VALUES ('${column}'); END`,
    );
  let serial = 0;
  const run = (name: string, args: unknown) => {
    const message: CommandMessage = { id: ++serial, name, args, now: Date.now() + serial };
    const answer = writer.execute(message);
    if (answer.error !== undefined) throw new Error(JSON.stringify(answer.error));
    return answer.value as Record<string, unknown>;
  };
  const asset = run('assets.create', {
    orgId: org.id,
    body: { name: 'Pallet', external_key: 'FP-1', description: 'blue', metadata: { a: 1 }, valid_from: '2026-01-01T00:00:00Z' },
  });
  const cases: [string, Record<string, unknown>, string[]][] = [
    ['a description', { description: 'red' }, ['description']],
    ['the same description', { description: 'red' }, []],
    ['a name and the same description', { name: 'Crate', description: 'red' }, ['name']],
    ['is_active false', { is_active: false }, ['is_active']],
    ['is_active false again', { is_active: false }, []],
    ['metadata', { metadata: { a: 2 } }, ['metadata']],
    ['the same metadata', { metadata: { a: 2 } }, []],
    ['valid_to', { valid_to: '2027-01-01T00:00:00Z' }, ['valid_to']],
    ['valid_from and the same valid_to', { valid_from: '2026-02-01T00:00:00Z', valid_to: '2027-01-01T00:00:00Z' }, ['valid_from']],
    ['description null', { description: null }, ['description']],
    ['an empty patch', {}, []],
  ];
  for (const [what, body, named] of cases) {
    db.exec('DELETE FROM named');
    const view = run('assets.patch', { orgId: org.id, id: asset.id, body });
    t.same(
      (db.prepare('SELECT column_name FROM named').pluck().all() as string[]).sort(),
      [...named, 'updated_at'].sort(),
      `${what}: the UPDATE names ${named.join(', ') || 'no column'} besides updated_at`,
    );
    for (const [field, value] of Object.entries(body))
      if (field !== 'valid_from' && field !== 'valid_to') t.same(view[field], value, `${what}: ${field} answered as patched`);
  }
  const row = db.prepare('SELECT name, description, is_active, metadata, valid_to FROM assets WHERE id = ?').get(asset.id);
  t.same(row, { name: 'Crate', description: null, is_active: 0, metadata: '{"a":2}', valid_to: Date.parse('2027-01-01T00:00:00Z') });
});
