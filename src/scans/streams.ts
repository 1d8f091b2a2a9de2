import { connect, nanos, type NatsConnection } from '@nats-io/transport-node';
import {
  JetStreamApiCodes,
  JetStreamApiError,
  StorageType,
  jetstreamManager,
  type JetStreamManager,
  type StreamInfo,
} from '@nats-io/jetstream';

export const SCANS_STREAM = 'SCANS';
export const SCANS_DEAD_STREAM = 'SCANS_DEAD';
/** Publish-side de-duplication window for Nats-Msg-Id (the event id). */
export const DUPLICATE_WINDOW_MS = 2 * 60_000;

export function isApiError(err: unknown, code: number): boolean {
  return err instanceof JetStreamApiError && err.code === code;
}

/**
 * Options of the JetStream clients that create and inspect streams and buckets: an R3 stream's
 * creation on nats-server 2.9 can outlast the client's default 5 s (seen when three nodes start).
 */
export const ADMIN_OPTIONS = { timeout: 30_000 };

/** Creates a file-storage stream when missing (with `replicas` copies); never deletes or rewrites it. */
export async function ensureStream(jsm: JetStreamManager, name: string, subject: string, replicas = 1): Promise<StreamInfo> {
  try {
    const info = await jsm.streams.info(name);
    return info.cluster === undefined || info.cluster.leader ? info : await streamWithLeader(jsm, name);
  } catch (err) {
    if (!isApiError(err, JetStreamApiCodes.StreamNotFound)) throw err;
  }
  try {
    await jsm.streams.add({
      name,
      subjects: [subject],
      storage: StorageType.File,
      num_replicas: replicas,
      duplicate_window: nanos(DUPLICATE_WINDOW_MS),
    });
  } catch (err) {
    // Another process created it between our two calls.
    await jsm.streams.info(name).catch(() => Promise.reject(err));
  }
  return streamWithLeader(jsm, name);
}

/**
 * The stream's info once it has a leader. A replicated stream just created on nats-server 2.9 has
 * none for a moment, and a publish to it meanwhile is refused ("jetstream is not enabled", the
 * server's 503), which would fail a starting node's first write.
 */
export async function streamWithLeader(jsm: JetStreamManager, name: string, timeoutMs = ADMIN_OPTIONS.timeout): Promise<StreamInfo> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const info = await jsm.streams.info(name);
    if (info.cluster === undefined || info.cluster.leader || Date.now() > deadline) return info;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * Whether an error is one of a JetStream cluster still electing (servers started together, a
 * deploy, a lost server): "jetstream is not enabled" (the server's 503), no responders, a timeout.
 */
function whileElecting(err: unknown): boolean {
  const { name, message } = err as Error;
  return /jetstream is not enabled|no responders/i.test(message) || name === 'TimeoutError' || name === 'NoRespondersError';
}

/**
 * Runs `op` until it succeeds, again after each failure of a cluster still electing (up to
 * `timeoutMs`); any other error throws at once. For the idempotent steps of a node's start: a node
 * started with its servers must not exit on the few seconds they take to elect their leaders.
 */
export async function whileJetStreamElects<T>(op: () => Promise<T>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await op();
    } catch (err) {
      if (!whileElecting(err) || Date.now() > deadline) throw err;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
}

/** Resolves once JetStream answers on this connection (see whileJetStreamElects). */
export async function jetStreamReady(nc: NatsConnection, timeoutMs = 60_000): Promise<void> {
  const jsm = await jetstreamManager(nc, { timeout: 2_000 });
  await whileJetStreamElects(() => jsm.getAccountInfo(), timeoutMs);
}

/**
 * Runs `op` again (up to `attempts` times in all) when it fails with a NATS timeout. On nats-server
 * before 2.12 an ephemeral consumer of a replicated stream (an ordered read, the object store's
 * reader) may be placed on a server that is down, and its creation then times out; another
 * attempt is placed anew (nats-io/nats-server#7165).
 */
export async function retryOnTimeout<T>(op: () => Promise<T>, attempts = 5): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await op();
    } catch (err) {
      if (attempt >= attempts || (err as Error).name !== 'TimeoutError') throw err;
    }
  }
}

/** Creates SCANS (`scans.>`) and SCANS_DEAD (`scans_dead.>`) when missing, with `replicas` copies; never deletes or rewrites them. */
export async function ensureScanStreams(jsm: JetStreamManager, replicas = 1): Promise<{ scans: StreamInfo; dead: StreamInfo }> {
  const scans = await ensureStream(jsm, SCANS_STREAM, 'scans.>', replicas);
  const dead = await ensureStream(jsm, SCANS_DEAD_STREAM, 'scans_dead.>', replicas);
  return { scans, dead };
}

export function connectNats(
  natsUrl: string,
  name: string,
  options: { reconnect: boolean; noAsyncTraces?: boolean },
): Promise<NatsConnection> {
  const { servers, user, pass } = splitCredentials(natsUrl);
  return connect({
    servers,
    ...(user === undefined ? {} : pass === undefined ? { token: user } : { user, pass }),
    name,
    maxReconnectAttempts: options.reconnect ? -1 : 0,
    reconnectTimeWait: 250,
    noAsyncTraces: options.noAsyncTraces ?? false,
  });
}

/**
 * nats.js ignores credentials in server URLs; `nats://user:pass@host:4222` (or `nats://token@host`)
 * is how operators write them in NATS_URL, so they are taken out and passed as options.
 */
export function splitCredentials(natsUrl: string): { servers: string[]; user?: string; pass?: string } {
  let user: string | undefined;
  let pass: string | undefined;
  const servers = natsUrl.split(',').map((entry) => {
    const s = entry.trim();
    const match = /^([a-z]+:\/\/)([^@/]*)@(.*)$/i.exec(s);
    if (match === null) return s;
    const [, scheme = '', credentials = '', rest = ''] = match;
    const [name = '', secret] = credentials.split(/:(.*)/s);
    user ??= decodeURIComponent(name);
    if (secret !== undefined) pass ??= decodeURIComponent(secret);
    return scheme + rest;
  });
  return { servers, user, pass };
}
