import t from 'tap';
import { fieldCodes, key, startLocations } from '../helpers/locations.js';

t.test('parent rules 1 to 4', async (t) => {
  const api = await startLocations(t);
  const other = await api.otherOrg();
  const p1 = await api.create({ external_key: key('P1'), name: 'Parent one' });
  const p2 = await api.create({ external_key: key('P2'), name: 'Parent two' });
  const dead = await api.create({ external_key: key('DEAD'), name: 'Deleted parent' });
  t.equal((await api.req('DELETE', `/api/v1/locations/${dead.id}`)).status, 204);
  const foreign = await other.create({ external_key: key('FOREIGN'), name: 'Other org parent' });

  t.test('POST: accepted parent forms', async (t) => {
    const cases: Array<[string, Record<string, unknown>, number | null, string | null]> = [
      ['parent_id alone', { parent_id: p1.id }, p1.id, p1.external_key],
      ['parent_external_key alone', { parent_external_key: p2.external_key }, p2.id, p2.external_key],
      ['both naming the same parent', { parent_id: p1.id, parent_external_key: p1.external_key }, p1.id, p1.external_key],
      ['parent_id null is a root', { parent_id: null }, null, null],
      ['parent_external_key null is a root', { parent_external_key: null }, null, null],
      ['both null is a root', { parent_id: null, parent_external_key: null }, null, null],
      ['neither is a root', {}, null, null],
    ];
    for (const [name, parent, parentId, parentKey] of cases) {
      const res = await api.req('POST', '/api/v1/locations', { name: 'Child', ...parent });
      t.equal(res.status, 201, name);
      t.equal(res.json.data.parent_id, parentId, `${name}: parent_id`);
      t.equal(res.json.data.parent_external_key, parentKey, `${name}: parent_external_key`);
    }
  });

  const rejected: Array<[string, Record<string, unknown>, Array<[string, string]>]> = [
    [
      'both naming different parents',
      { parent_id: p1.id, parent_external_key: p2.external_key },
      [
        ['parent_id', 'ambiguous_fields'],
        ['parent_external_key', 'ambiguous_fields'],
      ],
    ],
    [
      'id null, key naming a parent',
      { parent_id: null, parent_external_key: p2.external_key },
      [
        ['parent_id', 'ambiguous_fields'],
        ['parent_external_key', 'ambiguous_fields'],
      ],
    ],
    [
      'both sent, the id does not resolve',
      { parent_id: 2147480000, parent_external_key: p2.external_key },
      [
        ['parent_id', 'fk_not_found'],
        ['parent_external_key', 'ambiguous_fields'],
      ],
    ],
    [
      'both sent, the key does not resolve',
      { parent_id: p1.id, parent_external_key: 'NO-SUCH-KEY' },
      [
        ['parent_id', 'ambiguous_fields'],
        ['parent_external_key', 'fk_not_found'],
      ],
    ],
    [
      'both sent, neither resolves',
      { parent_id: 2147480000, parent_external_key: 'NO-SUCH-KEY' },
      [
        ['parent_id', 'fk_not_found'],
        ['parent_external_key', 'fk_not_found'],
      ],
    ],
    ['missing parent_id', { parent_id: 2147480000 }, [['parent_id', 'fk_not_found']]],
    ['missing parent_external_key', { parent_external_key: 'NO-SUCH-KEY' }, [['parent_external_key', 'fk_not_found']]],
    ['soft-deleted parent by id', { parent_id: dead.id }, [['parent_id', 'fk_not_found']]],
    ['soft-deleted parent by key', { parent_external_key: dead.external_key }, [['parent_external_key', 'fk_not_found']]],
    ['parent of another organization by id', { parent_id: foreign.id }, [['parent_id', 'fk_not_found']]],
    ['parent of another organization by key', { parent_external_key: foreign.external_key }, [['parent_external_key', 'fk_not_found']]],
    ['parent_id of the wrong type', { parent_id: 'x' }, [['parent_id', 'invalid_value']]],
    ['parent_id 0', { parent_id: 0 }, [['parent_id', 'too_small']]],
    ['parent_id above the id ceiling', { parent_id: 2147483648 }, [['parent_id', 'too_large']]],
    ['parent_external_key outside the pattern', { parent_external_key: 'a_b' }, [['parent_external_key', 'invalid_value']]],
    ['parent_external_key empty', { parent_external_key: '' }, [['parent_external_key', 'too_short']]],
  ];

  t.test('POST: rejected parent forms', async (t) => {
    for (const [name, parent, expected] of rejected) {
      const res = await api.req('POST', '/api/v1/locations', { name: 'Child', ...parent });
      t.equal(res.status, 400, name);
      t.equal(res.json.error.type, 'validation_error', name);
      t.same(fieldCodes(res), expected, name);
    }
  });

  t.test('PATCH: the same rejections, and nothing changes', async (t) => {
    const loc = await api.create({ external_key: key('MOVE'), name: 'Mover', parent_id: p1.id });
    for (const [name, parent, expected] of rejected) {
      const res = await api.req('PATCH', `/api/v1/locations/${loc.id}`, parent);
      t.equal(res.status, 400, name);
      t.same(fieldCodes(res), expected, name);
    }
    const after = await api.req('GET', `/api/v1/locations/${loc.id}`);
    t.same(after.json.data, loc, 'rejected PATCHes changed nothing, updated_at included');
  });

  t.test('PATCH: fk_not_found is reported together with the other field failures', async (t) => {
    const loc = await api.create({ external_key: key('TOGETHER'), name: 'Together', valid_from: '2020-01-01T00:00:00Z' });
    const res = await api.req('PATCH', `/api/v1/locations/${loc.id}`, { parent_id: 2147480000, valid_to: '2019-01-01T00:00:00Z' });
    t.equal(res.status, 400);
    t.same(fieldCodes(res), [
      ['parent_id', 'fk_not_found'],
      ['valid_to', 'invalid_value'],
    ]);
    t.match(res.json.error.detail, /\(and 1 more validation errors\)$/);

    // Failures that need the organization's data are reported with the body's own failures too.
    const post = await api.req('POST', '/api/v1/locations', { name: '', parent_id: 2147480000, colour: 'red' });
    t.same(fieldCodes(post), [
      ['colour', 'unknown_field'],
      ['name', 'too_short'],
      ['parent_id', 'fk_not_found'],
    ]);
    const bothForms = await api.req('POST', '/api/v1/locations', { name: 7, parent_id: p1.id, parent_external_key: p2.external_key });
    t.same(fieldCodes(bothForms), [
      ['name', 'invalid_value'],
      ['parent_id', 'ambiguous_fields'],
      ['parent_external_key', 'ambiguous_fields'],
    ]);
    const patch = await api.req('PATCH', `/api/v1/locations/${loc.id}`, {
      name: null,
      updated_at: '2001-01-01T00:00:00Z',
      parent_external_key: 'NO-SUCH-KEY',
      parent_id: 'x',
    });
    t.same(fieldCodes(patch), [
      ['name', 'invalid_value'],
      ['parent_id', 'invalid_value'],
      ['updated_at', 'read_only'],
      ['parent_external_key', 'fk_not_found'],
    ]);
    const after = await api.req('GET', `/api/v1/locations/${loc.id}`);
    t.same(after.json.data, loc, 'nothing changed');
  });

  t.test('PATCH: re-parent by either form, both agreeing, and back to root', async (t) => {
    const loc = await api.create({ external_key: key('REPARENT'), name: 'Reparented' });
    const steps: Array<[Record<string, unknown>, number | null]> = [
      [{ parent_id: p1.id }, p1.id],
      [{ parent_external_key: p2.external_key }, p2.id],
      [{ parent_id: p1.id, parent_external_key: p1.external_key }, p1.id],
      [{ parent_external_key: null }, null],
      [{ parent_id: p2.id }, p2.id],
      [{ parent_id: null }, null],
    ];
    for (const [patch, expected] of steps) {
      const res = await api.req('PATCH', `/api/v1/locations/${loc.id}`, patch);
      t.equal(res.status, 200, JSON.stringify(patch));
      t.equal(res.json.data.parent_id, expected, JSON.stringify(patch));
    }
    await api.req('PATCH', `/api/v1/locations/${loc.id}`, { parent_id: p1.id });
    const kids = await api.req('GET', `/api/v1/locations/${p1.id}/children`);
    t.ok(
      kids.json.data.some((l: { id: number }) => l.id === loc.id),
      'now listed under its new parent',
    );
    const old = await api.req('GET', `/api/v1/locations/${p2.id}/children`);
    t.notOk(
      old.json.data.some((l: { id: number }) => l.id === loc.id),
      'and no longer under the old one',
    );
  });

  t.test('PATCH: a value equal to the current state is accepted', async (t) => {
    const loc = await api.create({ external_key: key('SAME'), name: 'Same parent', parent_id: p1.id });
    for (const patch of [
      { parent_id: p1.id },
      { parent_external_key: p1.external_key },
      { parent_id: p1.id, parent_external_key: p1.external_key },
    ]) {
      const res = await api.req('PATCH', `/api/v1/locations/${loc.id}`, patch);
      t.equal(res.status, 200, JSON.stringify(patch));
      t.equal(res.json.data.parent_id, p1.id);
    }
    const root = await api.create({ external_key: key('SAMEROOT'), name: 'Same root' });
    const res = await api.req('PATCH', `/api/v1/locations/${root.id}`, { parent_id: null, parent_external_key: null });
    t.equal(res.status, 200);
    t.equal(res.json.data.parent_id, null);
  });

  t.test('PATCH: cycles are 409 with distinct details; promotion to root always works', async (t) => {
    // a -> b -> c -> d (a is the root)
    const a = await api.create({ external_key: key('CA'), name: 'A' });
    const b = await api.create({ external_key: key('CB'), name: 'B', parent_id: a.id });
    const c = await api.create({ external_key: key('CC'), name: 'C', parent_id: b.id });
    const d = await api.create({ external_key: key('CD'), name: 'D', parent_id: c.id });

    const self = await api.req('PATCH', `/api/v1/locations/${b.id}`, { parent_id: b.id });
    t.equal(self.status, 409);
    t.equal(self.json.error.type, 'conflict');
    t.match(self.json.error.detail, /own parent/);
    const selfByKey = await api.req('PATCH', `/api/v1/locations/${b.id}`, { parent_external_key: b.external_key });
    t.equal(selfByKey.status, 409);
    t.equal(selfByKey.json.error.detail, self.json.error.detail, 'the same self-parent detail whichever form');

    const longer: Array<[string, number]> = [
      ['child', c.id],
      ['grandchild', d.id],
    ];
    for (const [name, target] of longer) {
      const res = await api.req('PATCH', `/api/v1/locations/${b.id}`, { parent_id: target });
      t.equal(res.status, 409, name);
      t.equal(res.json.error.type, 'conflict');
      t.match(res.json.error.detail, /descendant/, name);
      t.not(res.json.error.detail, self.json.error.detail, 'longer cycles read differently from a self-parent');
    }
    const fromRoot = await api.req('PATCH', `/api/v1/locations/${a.id}`, { parent_external_key: d.external_key });
    t.equal(fromRoot.status, 409, 'a root under its deepest descendant');

    const unchanged = await api.req('GET', `/api/v1/locations/${b.id}`);
    t.equal(unchanged.json.data.parent_id, a.id);
    t.equal(unchanged.json.data.updated_at, b.updated_at, 'a 409 does not advance updated_at');

    const sideways = await api.req('PATCH', `/api/v1/locations/${d.id}`, { parent_id: a.id });
    t.equal(sideways.status, 200, 'moving up within the same tree is not a cycle');
    const promote = await api.req('PATCH', `/api/v1/locations/${b.id}`, { parent_id: null });
    t.equal(promote.status, 200, 'promotion to root of a location with descendants');
    t.equal(promote.json.data.parent_id, null);
    t.equal(promote.json.data.parent_external_key, null);
    const nowOk = await api.req('PATCH', `/api/v1/locations/${a.id}`, { parent_id: c.id });
    t.equal(nowOk.status, 200, 'a is no longer above c, so c may become its parent');
    const anc = await api.req('GET', `/api/v1/locations/${a.id}/ancestors`);
    t.same(
      anc.json.data.map((l: { id: number }) => l.id),
      [b.id, c.id],
    );
  });
});
