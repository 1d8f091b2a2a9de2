import type { Scenario } from '../lib/scenario.js';
import { assetById, assetByIdUncached } from './assetById.js';
import { assetList } from './assetList.js';
import { exportScenario, importScenario } from './bulk.js';
import { createPatch } from './createPatch.js';
import { drainReads } from './drainReads.js';
import { eventsFanout, eventsSseLatency, eventsWsLatency } from './events.js';
import { history } from './history.js';
import { ingestField } from './ingestField.js';
import { ingestRaw } from './ingestRaw.js';
import { ingestSingle } from './ingestSingle.js';
import { mix } from './mix.js';
import { orgsMe } from './orgsMe.js';
import { report, reportByLocation, reportDeepOffset } from './report.js';
import { reportFullScan } from './reportFullScan.js';
import { treeAncestors } from './treeAncestors.js';
import { treeDescendants } from './treeDescendants.js';
import { webhooks1, webhooks4 } from './webhooks.js';

/** Every scenario, in the order they run and print. */
export const SCENARIOS: Scenario[] = [
  orgsMe,
  assetById,
  assetByIdUncached,
  assetList,
  report,
  reportByLocation,
  reportDeepOffset,
  reportFullScan,
  history,
  treeAncestors,
  treeDescendants,
  createPatch,
  ingestField,
  ingestSingle,
  drainReads,
  ingestRaw,
  mix,
  eventsSseLatency,
  eventsWsLatency,
  eventsFanout,
  webhooks1,
  webhooks4,
  importScenario,
  exportScenario,
];
