import type { Migration } from '../../src/storage/sqlite.js';
import * as masterData from './001_master_data.js';
import * as scans from './002_scans.js';
import * as assetListIndexes from './003_asset_list_indexes.js';
import * as locationTree from './004_location_tree.js';
import * as scanReport from './005_scan_report.js';
import * as scanResolution from './006_scan_resolution.js';
import * as eventIdRetention from './007_event_id_retention.js';
import * as validityBoundaries from './008_validity_boundaries.js';
import * as reportOrderInMemory from './009_report_order_in_memory.js';
import * as eventLog from './010_event_log.js';
import * as bulkJobs from './011_bulk_jobs.js';
import * as countsKept from './012_counts_kept.js';
import * as qTextIndex from './013_q_text_index.js';
import * as webhooks from './014_webhooks.js';
import * as qCountOutside from './015_q_count_outside.js';
import * as textIndexDeferrable from './016_text_index_deferrable.js';
import * as rereadLog from './017_reread_log.js';
import * as historyNextId from './018_history_next_id.js';
import * as rereadBlocks from './019_reread_blocks.js';
import * as locationMembersInMemory from './020_location_members_in_memory.js';
import * as reportAssetKey from './021_report_asset_key.js';
import * as historyMarks from './022_history_marks.js';

/** Shard schema migrations, in order. Each feature adds its own file here. */
export const shardMigrations: Migration[] = [
  masterData,
  scans,
  assetListIndexes,
  locationTree,
  scanReport,
  scanResolution,
  eventIdRetention,
  validityBoundaries,
  reportOrderInMemory,
  eventLog,
  bulkJobs,
  countsKept,
  qTextIndex,
  webhooks,
  qCountOutside,
  textIndexDeferrable,
  rereadLog,
  historyNextId,
  rereadBlocks,
  locationMembersInMemory,
  reportAssetKey,
  historyMarks,
];
