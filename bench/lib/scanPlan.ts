/**
 * Scan workloads, generated inside the publisher process from a few parameters (a backlog of
 * 200,000 messages is not shipped through a spec file). Bodies are scan messages as trackd ingests them.
 */
import fs from 'node:fs';
import { rfidValue } from '../dataset/sizes.js';

export type ScanMode =
  /** Every read moves its asset to another location (history seeding: one history row per read). */
  | 'moves'
  /** The field workload: 95% re-reads of parked tags at their location, 5% moves. */
  | 'field'
  /** Every asset read once where it is parked (one message per group of a location): opens its visits "now". */
  | 'revisit';

export interface ScanPlan {
  mode: ScanMode;
  orgId: number;
  assets: { first: number; count: number };
  /** Location external keys scans are published at. */
  locations: string[];
  readsPerMessage: number;
  messages: number;
  /** Where each asset is parked before the plan starts: location index (assetOffset + parkedRound) % locations.length. */
  parkedRound: number;
  /**
   * Field plans: a file with where each asset is parked (Int32 location indexes), read instead of
   * parkedRound when it exists and written back by the publisher, so that each field workload
   * continues from where the previous one left trackd (else its 5% moves pile up as "re-reads"
   * of assets trackd has elsewhere, which are moves).
   */
  positionsFile?: string;
  /** observed_at of message i: `observedBase + i * observedStepMs`; 0 base means wall-clock time at build. */
  observedBase: number;
  observedStepMs: number;
  eventPrefix: string;
}

export interface ScanMessage {
  subject: string;
  eventId: string;
  body: string;
  /** First read of the message: the asset a prober can watch, and the message's observed_at (ms). */
  asset: number;
  observedAt: number;
}

/** A generator of messages; the 'moves' plan also tells where every asset ended. */
export class ScanGenerator {
  private readonly at: Int32Array;
  private readonly parked: number[][];
  private index = 0;
  private lastObserved = 0;
  private readonly subject: string;

  constructor(private readonly plan: ScanPlan) {
    const L = plan.locations.length;
    this.at = new Int32Array(plan.assets.count);
    this.parked = Array.from({ length: L }, () => []);
    const saved = plan.positionsFile !== undefined && fs.existsSync(plan.positionsFile) ? readInt32s(plan.positionsFile) : undefined;
    for (let a = 0; a < plan.assets.count; a++) {
      const where = saved?.[a] ?? (a + plan.parkedRound) % L;
      this.at[a] = where;
      this.parked[where]!.push(a);
    }
    this.subject = `scans.${plan.orgId}.fixed`;
  }

  /** Writes where the assets are now to the plan's positionsFile (after every message was published). */
  savePositions(): void {
    if (this.plan.positionsFile !== undefined) fs.writeFileSync(this.plan.positionsFile, this.at);
  }

  get done(): boolean {
    if (this.plan.mode === 'revisit') {
      // Counted on the first call (the generator body runs on its first next()).
      if (this.index === 0) return this.parked.every((here) => here.length === 0);
      return this.revisitsLeft <= 0;
    }
    return this.index >= this.plan.messages;
  }

  next(): ScanMessage {
    const { plan } = this;
    const i = this.index++;
    let observedAt = plan.observedBase === 0 ? Date.now() : plan.observedBase + i * plan.observedStepMs;
    // Never earlier than the previous message, but never ahead of the clock either: forcing a new
    // millisecond per message put a fast burst seconds in the future, and the next plan's scans
    // (wall-clock times) then arrived as late scans, a slower path than the field workload's.
    if (observedAt < this.lastObserved) observedAt = this.lastObserved;
    this.lastObserved = observedAt;
    const offsets = plan.mode === 'moves' ? this.movesBatch() : plan.mode === 'revisit' ? this.revisitBatch() : this.fieldBatch();
    const first = offsets[0]!; // a batch holds at least one read
    const location = plan.mode === 'field' ? this.fieldLocation : this.at[first]!;
    const eventId = `${plan.eventPrefix}-${i}`;
    const body = JSON.stringify({
      event_id: eventId,
      observed_at: new Date(observedAt).toISOString(),
      location: { external_key: plan.locations[location] },
      reads: offsets.map((a) => ({ tag_type: 'rfid', value: rfidValue(plan.assets.first + a) })),
      reader_id: 'bench',
    });
    return { subject: this.subject, eventId, body, asset: plan.assets.first + first, observedAt };
  }

  private readonly moves = this.movesGroups();
  /** Moves: in round r asset a is read at location (a + r) % L, so every read is a move; one message per location group. */
  private *movesGroups(): Generator<{ where: number; batch: number[] }> {
    const { plan } = this;
    const L = plan.locations.length;
    for (let round = plan.parkedRound + 1; ; round++) {
      for (let where = 0; where < L; where++) {
        let batch: number[] = [];
        for (let a = (((where - round) % L) + L) % L; a < plan.assets.count; a += L) {
          batch.push(a);
          if (batch.length === plan.readsPerMessage) {
            yield { where, batch };
            batch = [];
          }
        }
        if (batch.length > 0) yield { where, batch };
      }
    }
  }

  private movesBatch(): number[] {
    const { where, batch } = this.moves.next().value as { where: number; batch: number[] };
    for (const a of batch) this.at[a] = where;
    return batch;
  }

  /** Revisit plans: the groups still to send (every parked asset once, a location's together). */
  private revisitsLeft = 0;
  private readonly revisits = this.revisitGroups();
  private *revisitGroups(): Generator<number[]> {
    const step = this.plan.readsPerMessage;
    this.revisitsLeft = this.parked.reduce((n, here) => n + Math.ceil(here.length / step), 0);
    for (const here of this.parked) {
      for (let i = 0; i < here.length; i += step) yield here.slice(i, i + step);
    }
  }

  private revisitBatch(): number[] {
    const group = this.revisits.next().value as number[];
    this.revisitsLeft--;
    return group;
  }

  private fieldLocation = 0;
  /** Field: a reader at one location reads what is parked there (95%) and a few newcomers (5%). */
  private fieldBatch(): number[] {
    const { plan } = this;
    const L = plan.locations.length;
    const where = Math.floor(Math.random() * L);
    this.fieldLocation = where;
    const here = this.parked[where]!;
    const batch: number[] = [];
    for (let k = 0; k < plan.readsPerMessage; k++) {
      if (here.length > 0 && Math.random() < 0.95) {
        batch.push(here[Math.floor(Math.random() * here.length)]!);
        continue;
      }
      const a = Math.floor(Math.random() * plan.assets.count);
      const from = this.at[a]!;
      if (from !== where) {
        const list = this.parked[from]!;
        const pos = list.indexOf(a);
        if (pos >= 0) {
          list[pos] = list[list.length - 1]!;
          list.pop();
        }
        here.push(a);
        this.at[a] = where;
      }
      batch.push(a);
    }
    return batch;
  }
}

function readInt32s(file: string): Int32Array {
  const bytes = fs.readFileSync(file);
  return new Int32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length));
}

/** Messages a 'moves' plan needs so that every asset is read `rounds` times. */
export function movesMessages(assets: number, locations: number, readsPerMessage: number, rounds: number): number {
  let perRound = 0;
  for (let where = 0; where < locations; where++) {
    const here = Math.floor(assets / locations) + (where < assets % locations ? 1 : 0);
    perRound += Math.ceil(here / readsPerMessage);
  }
  return perRound * rounds;
}
