import fs from 'node:fs';
import t from 'tap';
import { ControlPlane } from '../../src/control/controlPlane.js';
import { ShardActors } from '../../src/shards/actors.js';
import '../../src/shards/commandIndex.js';
import { commandNamed } from '../../src/shards/commands.js';
import type { CommandAnswer, CommandMessage } from '../../src/shards/mailbox.js';
import { PortMailbox } from '../../src/shards/mailbox.js';
import { eventually, tempDir, type Teardown } from '../helpers/trackd.js';

/**
 * The shard actor's thread sends the answers of the commands it ran in one turn (a round) together:
 * one message per mailbox port per turn, an array when several, each answer once and in order
 * (src/shards/worker.ts); the mailbox settles each of them (src/shards/mailbox.ts).
 */
async function actor(t: Teardown & { fail(message: string): void }) {
  const dir = tempDir('trackd-answers-');
  const control = await ControlPlane.open(dir);
  const org = await control.createOrg('answers', 1);
  control.close();
  const actors = new ShardActors(dir, (_index, err) => t.fail(`the actor crashed: ${err.message}`));
  t.teardown(async () => {
    await actors.closeAll();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return { actors, org };
}

const create = (id: number, orgId: number): CommandMessage => ({
  id,
  name: 'assets.create',
  args: { orgId, body: { name: `Answer ${id}`, external_key: `ANS-${id}`, tags: [] } },
  now: Date.now(),
});

t.test('the answers of one round come back in one message per port, each once, in order', async (t) => {
  const { actors, org } = await actor(t);
  const { port } = await actors.connect(0);
  const messages: (CommandAnswer | CommandAnswer[])[] = [];
  port.on('message', (message: CommandAnswer | CommandAnswer[]) => messages.push(message));
  const COMMANDS = 20;
  // Posted in one turn of this thread: they reach the actor together and run in rounds.
  for (let id = 1; id <= COMMANDS; id++) port.postMessage(create(id, org.id));
  const answers = () => messages.flatMap((m) => (Array.isArray(m) ? m : [m]));
  await eventually(() => answers().length >= COMMANDS);
  t.same(
    answers().map((a) => a.id),
    Array.from({ length: COMMANDS }, (_, i) => i + 1),
    'every command answered once, in order',
  );
  t.same(
    answers().filter((a) => a.error !== undefined),
    [],
    'none failed',
  );
  t.ok(messages.length < COMMANDS, `fewer messages than answers (${messages.length} for ${COMMANDS})`);
  port.close();
});

t.test('a mailbox settles every answer of a message that holds several', async (t) => {
  const { actors, org } = await actor(t);
  const { port } = await actors.connect(0);
  const mailbox = new PortMailbox(port);
  t.teardown(() => mailbox.close());
  const command = commandNamed('assets.create')!;
  const views = (await Promise.all(
    Array.from({ length: 12 }, (_, i) => mailbox.send(command, create(i + 1, org.id).args as { orgId: number; body: object } as never)),
  )) as { external_key: string }[];
  t.same(
    views.map((v) => v.external_key),
    Array.from({ length: 12 }, (_, i) => `ANS-${i + 1}`),
    'each send resolved with its own asset',
  );
});
