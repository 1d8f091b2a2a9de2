export type SizeName = 'tiny' | 'small' | 'large';

export interface DatasetSize {
  assets: number;
  locations: number;
  /** History rows to seed through the real ingest path (one scan per row, each a move). */
  historyRows: number;
  /** Length of the deep branch (a parent chain) used by the tree scenarios. */
  deepBranch: number;
  /** Assets (one tag each) the import scenario imports into an org of its own. */
  bulkRows: number;
}

export const SIZES: Record<SizeName, DatasetSize> = {
  tiny: { assets: 500, locations: 60, historyRows: 2_000, deepBranch: 8, bulkRows: 2_000 },
  small: { assets: 10_000, locations: 1_000, historyRows: 100_000, deepBranch: 16, bulkRows: 100_000 },
  large: { assets: 1_000_000, locations: 10_000, historyRows: 10_000_000, deepBranch: 24, bulkRows: 1_000_000 },
};

/** Facts about the seeded dataset that scenarios draw their random ids and keys from. */
export interface DatasetInfo {
  size: SizeName;
  orgId: number;
  shardFile: string;
  /** Asset ids are contiguous: first .. first+count-1. */
  assets: { first: number; count: number };
  locations: { first: number; count: number };
  /** Root first, deepest last. */
  deepBranch: number[];
  /** Roots of large subtrees in the wide part of the tree (descendants scenario). */
  subtreeRoots: number[];
  /** Locations that scans are published at (leaves of the wide tree), with their external keys. */
  scanLocations: { id: number; external_key: string }[];
  historyRows: number;
  /** Assets with a current location (seeded through ingest). */
  scannedAssets: number;
  /** Seeding round the assets are parked at (asset offset a sits at scan location (a + round) % L). */
  parkedRound: number;
  seconds: { masterData: number; history: number };
  notes: string[];
}

/** The rfid tag value the loader gives an asset (24 hex digits, EPC-like), so publishers can derive it. */
export function rfidValue(assetId: number): string {
  return `E280${assetId.toString(16).toUpperCase().padStart(20, '0')}`;
}

export const assetKey = (id: number): string => `A${String(id).padStart(8, '0')}`;
export const locationKey = (id: number): string => `L${String(id).padStart(6, '0')}`;
