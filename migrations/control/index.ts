import type { Migration } from '../../src/storage/sqlite.js';
import * as orgsAndKeys from './001_orgs_and_keys.js';

export const controlMigrations: Migration[] = [orgsAndKeys];
