import fs from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { connectAsync, type MqttClient } from 'mqtt';
import { CliError, intFlag, type Command, type CommandContext } from '../cli/common.js';

interface ReaderMessage {
  topic: string;
  payload: string;
  reads: number;
}

/** Most QoS 1 publishes awaiting their PUBACK at once when replaying as fast as possible. */
const IN_FLIGHT = 1024;
/** Characters nats-server 2.9 refuses in MQTT topics, and the topic and subject wildcards. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: NUL is one of the characters nats-server refuses
const TOPIC_UNSAFE = /[\s.+#/*>\u0000]/;

/** MQTT_URL, else the URL the running server wrote to DATA_DIR/mqtt.url for its embedded nats-server. */
export function mqttUrlFor(ctx: CommandContext): string {
  const fromEnv = process.env.MQTT_URL;
  if (fromEnv !== undefined && fromEnv !== '') return fromEnv;
  const file = path.join(ctx.config.DATA_DIR, 'mqtt.url');
  if (!fs.existsSync(file))
    throw new CliError(`MQTT_URL is unset and ${file} does not exist: start \`trackd serve\` first or set MQTT_URL`);
  return fs.readFileSync(file, 'utf8').trim();
}

/**
 * Reads a CS463 capture: one message a line, `topic<TAB>payload` or just the payload. The captured
 * topic is not reused (it is the capturing broker's); each message goes to readers/<org>/cs463/<rfidReaderName>.
 */
export function readCapture(file: string, orgId: number): ReaderMessage[] {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new CliError(`cannot read ${file}: ${(err as Error).message}`);
  }
  const messages: ReaderMessage[] = [];
  text.split('\n').forEach((line, index) => {
    if (line.trim() === '') return;
    const payload = line.includes('\t') ? line.slice(line.indexOf('\t') + 1) : line;
    let body: { rfidReaderName?: unknown; tags?: unknown };
    try {
      body = JSON.parse(payload);
    } catch (err) {
      throw new CliError(`${file}:${index + 1}: payload is not JSON: ${(err as Error).message}`);
    }
    const reader = body?.rfidReaderName;
    if (typeof reader !== 'string' || reader === '' || TOPIC_UNSAFE.test(reader)) {
      throw new CliError(`${file}:${index + 1}: rfidReaderName must be a non-empty string without spaces, '.', '/', '+', '#', '*' or '>'`);
    }
    messages.push({ topic: `readers/${orgId}/cs463/${reader}`, payload, reads: Array.isArray(body.tags) ? body.tags.length : 0 });
  });
  return messages;
}

function rateFlag(value: unknown): number | undefined {
  if (value === undefined) return undefined;
  const rate = Number(value);
  if (typeof value !== 'string' || !Number.isFinite(rate) || rate <= 0)
    throw new CliError(`--rate must be a positive number of messages per second, got ${JSON.stringify(value)}`);
  return rate;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function publishAll(client: MqttClient, messages: ReaderMessage[], rate: number | undefined): Promise<void> {
  const started = performance.now();
  const inFlight = new Set<Promise<unknown>>();
  let acknowledged = 0;
  const lostError = () =>
    new CliError(`the MQTT broker closed the connection (${acknowledged} of ${messages.length} messages acknowledged)`);
  // Without reconnects, publishes awaiting a PUBACK never settle once the broker drops the connection.
  const lost = new Promise<never>((_, reject) => client.once('close', () => reject(lostError())));
  lost.catch(() => undefined);
  for (let i = 0; i < messages.length; i++) {
    if (rate !== undefined) {
      const due = started + (i * 1000) / rate;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
    }
    if (!client.connected) throw lostError();
    const p: Promise<unknown> = client.publishAsync(messages[i]!.topic, messages[i]!.payload, { qos: 1 }).then(() => {
      acknowledged++;
      inFlight.delete(p);
    });
    inFlight.add(p);
    if (inFlight.size >= IN_FLIGHT) await Promise.race([...inFlight, lost]);
  }
  await Promise.race([Promise.all(inFlight), lost]);
}

/** `trackd readers replay FILE --org ID [--rate N]`: publishes a CS463 capture over MQTT (QoS 1, in file order). */
export const readersReplay: Command = {
  options: { org: { type: 'string' }, rate: { type: 'string' } },
  async run(ctx) {
    const file = ctx.positionals[0];
    if (file === undefined || ctx.positionals.length > 1) throw new CliError('usage: trackd readers replay FILE --org ID [--rate N]');
    const orgId = intFlag(ctx.flags, 'org');
    const rate = rateFlag(ctx.flags.rate);
    const messages = readCapture(file, orgId);
    const url = mqttUrlFor(ctx);
    let client: MqttClient;
    try {
      client = await connectAsync(url, {
        clientId: `trackd-replay-${process.pid}-${Date.now()}`,
        clean: true,
        reconnectPeriod: 0,
        connectTimeout: 10_000,
      });
    } catch (err) {
      throw new CliError(`cannot connect to MQTT at ${url}: ${(err as Error).message}`);
    }
    const started = performance.now();
    try {
      await publishAll(client, messages, rate);
    } finally {
      await client.endAsync();
    }
    const seconds = (performance.now() - started) / 1000;
    const reads = messages.reduce((n, m) => n + m.reads, 0);
    return {
      messages: messages.length,
      reads,
      seconds: Number(seconds.toFixed(3)),
      rate: Math.round(messages.length / seconds),
      reads_per_second: Math.round(reads / seconds),
    };
  },
};
