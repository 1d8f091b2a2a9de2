/**
 * The console on any node (cluster mode): users and web sessions live in the cluster's bucket, so
 * a user created with the CLI of one node signs in on another, the session cookie works on every
 * node, and a logout on one node ends it on all of them.
 */
import t from 'tap';
import { startTwoNodes } from '../helpers/cluster.js';
import { createUser, login } from '../helpers/console.js';
import { eventually } from '../helpers/trackd.js';

const SESSION = '/console/api/session';

t.test('a console user and session work on every node', async (t) => {
  const { a, b } = await startTwoNodes(t);
  const org = await a.createOrg('Console Org');
  const created = createUser(a, 'ann@example.com', [org.id]);
  t.equal(created.created, true, 'the user is created through node A’s CLI');
  const again = createUser(b, 'ANN@example.com', [org.id]);
  t.same([again.created, again.id], [false, created.id], 'node B’s CLI finds the same user (one per email, cluster-wide)');

  // Signed in on node B, which did not create the user.
  const ann = await eventually(() => login(b, 'ann@example.com', org.id).catch(() => undefined), 10_000);
  t.equal(ann.body.data.user.email, 'ann@example.com', 'signed in on node B');
  const onA = await eventually(async () => {
    const res = await a.request('GET', SESSION, { headers: { cookie: ann.cookie } });
    return res.status === 200 && res;
  }, 10_000).catch(() => undefined);
  t.equal(onA?.json.data.user.email, 'ann@example.com', 'the session cookie works on node A');

  const out = await a.request('POST', '/console/api/logout', { headers: { cookie: ann.cookie, 'x-csrf-token': ann.csrf } });
  t.equal(out.status, 204, 'signed out on node A');
  const onB = await eventually(async () => {
    const res = await b.request('GET', SESSION, { headers: { cookie: ann.cookie } });
    return res.status === 401 && res;
  }, 10_000).catch(() => undefined);
  t.equal(onB?.status, 401, 'and the session has ended on node B too');
});
