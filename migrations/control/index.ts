import type { Migration } from '../../src/storage/sqlite.js';
import * as orgsAndKeys from './001_orgs_and_keys.js';
import * as usersAndSessions from './003_users_and_sessions.js';
import * as keyLastUsed from './004_key_last_used.js';

export const controlMigrations: Migration[] = [orgsAndKeys, usersAndSessions, keyLastUsed];
