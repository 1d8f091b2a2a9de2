import fs from 'node:fs';
import path from 'node:path';
import { headers } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { ulid } from 'ulid';
import { CliError, intFlag, requireFlag, type Command, type CommandContext } from '../cli/common.js';
import { ADMIN_OPTIONS, connectNats, ensureScanStreams, SCANS_STREAM } from './streams.js';

/** NATS_URL, else the URL the running server wrote to DATA_DIR/nats.url for its embedded nats-server. */
export function natsUrlFor(ctx: CommandContext): string {
  if (ctx.config.NATS_URL !== undefined) return ctx.config.NATS_URL;
  const file = path.join(ctx.config.DATA_DIR, 'nats.url');
  if (!fs.existsSync(file))
    throw new CliError(`NATS_URL is unset and ${file} does not exist: start \`trackd serve\` first or set NATS_URL`);
  return fs.readFileSync(file, 'utf8').trim();
}

function parseTag(text: string): { tag_type: string; value: string } {
  const colon = text.indexOf(':');
  if (colon <= 0 || colon === text.length - 1) throw new CliError(`--tag must look like TYPE:VALUE, got ${JSON.stringify(text)}`);
  return { tag_type: text.slice(0, colon), value: text.slice(colon + 1) };
}

/** `trackd scans publish`: one scan on scans.<org>.<source>, Nats-Msg-Id = event id. */
export const scansPublish: Command = {
  options: {
    org: { type: 'string' },
    location: { type: 'string' },
    tag: { type: 'string', multiple: true },
    'observed-at': { type: 'string' },
    source: { type: 'string' },
    'event-id': { type: 'string' },
  },
  async run(ctx) {
    const orgId = intFlag(ctx.flags, 'org');
    const location = requireFlag(ctx.flags, 'location');
    const tags = (ctx.flags.tag as string[] | undefined) ?? [];
    if (tags.length === 0) throw new CliError('--tag is required (repeat it for several reads)');
    const source = (ctx.flags.source as string | undefined) ?? 'fixed';
    if (source !== 'fixed' && source !== 'handheld')
      throw new CliError(`--source must be fixed or handheld, got ${JSON.stringify(source)}`);
    const eventId = (ctx.flags['event-id'] as string | undefined) ?? ulid();
    const observedAt = (ctx.flags['observed-at'] as string | undefined) ?? new Date().toISOString();
    const body = {
      event_id: eventId,
      observed_at: observedAt,
      location: { external_key: location },
      reads: tags.map(parseTag),
      reader_id: 'trackd-cli',
    };
    const nc = await connectNats(natsUrlFor(ctx), 'trackd-cli', { reconnect: false });
    try {
      await ensureScanStreams(await jetstreamManager(nc, ADMIN_OPTIONS), ctx.config.JOURNAL_REPLICAS);
      const h = headers();
      h.set('Nats-Msg-Id', eventId);
      const ack = await jetstream(nc).publish(`scans.${orgId}.${source}`, JSON.stringify(body), { headers: h });
      return { event_id: eventId, stream: ack.stream ?? SCANS_STREAM, seq: ack.seq };
    } finally {
      await nc.close();
    }
  },
};
