import t from 'tap';
import { startTrackd } from '../helpers/trackd.js';

t.test('GET /api/v1/orgs/me answers for any valid API key, from the native uWS server', async (t) => {
  const trackd = await startTrackd(t);
  const org = await trackd.createOrg('Acme Logistics');
  const key = await trackd.createKey(org.id, ['assets:read']);
  const res = await trackd.http('GET', '/api/v1/orgs/me', { token: key.token });
  t.equal(res.status, 200);
  t.equal(res.headers.get('uwebsockets'), '20', 'served by the native uWebSockets binary, not the ws fallback');
  t.same(res.json, { data: { id: org.id, name: 'Acme Logistics', scopes: ['assets:read'], api_key_id: key.api_key_id } });
});
