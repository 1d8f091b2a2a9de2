import type { Knex } from 'knex';

export const name = '019_reread_blocks';

/** Bytes of one entry in a block: asset id, visit id, last_seen_at, read count, each a little-endian float64. */
const ENTRY_BYTES = 32;

/**
 * The re-read log in one row per scan batch instead of one row per re-read (issue 13,
 * docs/field-rereads.md): a batch of 100,000 reads spent about a tenth of its time inserting its
 * 95,000 log rows, and every reading thread as long again reading them back.
 *
 * scan_reread_blocks holds a batch's entries in seq order as one blob (src/scans/rereadLog.ts
 * encodeBlock): the block's entries have the seqs last_seq - n + 1 .. last_seq. The rules of
 * migration 017 stand: seqs are drawn by the writer and never reused, the latest entry of an
 * asset is laid over its scan_positions row, and a fold cycle's end deletes the blocks at or below
 * cycle_seq (always a block's last seq: a cycle begins with it at the last seq appended so far).
 * The rows of scan_rereads become blocks of consecutive seqs, cut at cycle_seq so that the next
 * cycle's end deletes exactly what it deleted before.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('CREATE TABLE scan_reread_blocks (last_seq INTEGER PRIMARY KEY, entries BLOB NOT NULL)');
  const [fold] = (await knex.raw('SELECT cycle_seq FROM scan_reread_fold WHERE id = 1')) as { cycle_seq: number }[];
  const cycleSeq = fold?.cycle_seq ?? 0;
  const rows = (await knex.raw('SELECT seq, asset_id, visit_id, last_seen_at, visit_read_count FROM scan_rereads ORDER BY seq')) as {
    seq: number;
    asset_id: number;
    visit_id: number;
    last_seen_at: number;
    visit_read_count: number;
  }[];
  // Runs of consecutive seqs (the writer drew them one after another), cut at cycle_seq.
  for (let from = 0; from < rows.length; ) {
    let to = from + 1;
    while (to < rows.length && rows[to]!.seq === rows[to - 1]!.seq + 1 && rows[to - 1]!.seq !== cycleSeq) to++;
    const entries = Buffer.alloc((to - from) * ENTRY_BYTES);
    for (let k = 0; k < to - from; k++) {
      const r = rows[from + k]!;
      entries.writeDoubleLE(r.asset_id, k * ENTRY_BYTES);
      entries.writeDoubleLE(r.visit_id, k * ENTRY_BYTES + 8);
      entries.writeDoubleLE(r.last_seen_at, k * ENTRY_BYTES + 16);
      entries.writeDoubleLE(r.visit_read_count, k * ENTRY_BYTES + 24);
    }
    await knex.raw('INSERT INTO scan_reread_blocks (last_seq, entries) VALUES (?, ?)', [rows[to - 1]!.seq, entries]);
    from = to;
  }
  await knex.raw('DROP TABLE scan_rereads');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE scan_rereads (
      seq INTEGER PRIMARY KEY,
      asset_id INTEGER NOT NULL,
      visit_id INTEGER NOT NULL,
      last_seen_at INTEGER NOT NULL,
      visit_read_count INTEGER NOT NULL
    )`);
  const blocks = (await knex.raw('SELECT last_seq, entries FROM scan_reread_blocks ORDER BY last_seq')) as {
    last_seq: number;
    entries: Buffer;
  }[];
  for (const { last_seq, entries } of blocks) {
    const n = entries.length / ENTRY_BYTES;
    for (let k = 0; k < n; k++) {
      await knex.raw('INSERT INTO scan_rereads (seq, asset_id, visit_id, last_seen_at, visit_read_count) VALUES (?, ?, ?, ?, ?)', [
        last_seq - n + 1 + k,
        entries.readDoubleLE(k * ENTRY_BYTES),
        entries.readDoubleLE(k * ENTRY_BYTES + 8),
        entries.readDoubleLE(k * ENTRY_BYTES + 16),
        entries.readDoubleLE(k * ENTRY_BYTES + 24),
      ]);
    }
  }
  await knex.raw('DROP TABLE scan_reread_blocks');
}
