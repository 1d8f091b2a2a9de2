import t from 'tap';
import { fieldCodes, key, startAssets } from '../helpers/assets.js';

t.test('asset tags sub-resource', async (t) => {
  const api = await startAssets(t);
  const tagsOf = async (id: number) => (await api.req('GET', `/api/v1/assets/${id}`)).json.data.tags;

  t.test('attach: 201 with the tag and a Location header, for each variant', async (t) => {
    const asset = await api.create({ name: 'Tagged' });
    const attached = [];
    for (const tagType of ['rfid', 'ble', 'barcode']) {
      const value = key(tagType);
      const res = await api.req('POST', `/api/v1/assets/${asset.id}/tags`, { tag_type: tagType, value });
      t.equal(res.status, 201, tagType);
      t.same(Object.keys(res.json.data).sort(), ['id', 'tag_type', 'value']);
      t.match(res.json.data, { tag_type: tagType, value });
      t.equal(res.headers.get('location'), `/api/v1/assets/${asset.id}/tags/${res.json.data.id}`);
      attached.push(res.json.data);
    }
    t.same(await tagsOf(asset.id), attached, 'the asset view lists its tags in id order');
    const after = await api.req('GET', `/api/v1/assets/${asset.id}`);
    t.equal(after.json.data.updated_at, asset.updated_at, 'attaching does not touch the asset updated_at');
  });

  t.test('attach validation: one case per rule', async (t) => {
    const asset = await api.create({ name: 'Validated' });
    const cases: Array<[string, unknown, Array<[string, string]>, Record<string, unknown>?]> = [
      ['tag_type omitted', { value: 'V' }, [['tag_type', 'required']]],
      ['tag_type null', { tag_type: null, value: 'V' }, [['tag_type', 'required']]],
      [
        'tag_type not allowed',
        { tag_type: 'nfc', value: 'V' },
        [['tag_type', 'invalid_value']],
        { allowed_values: ['rfid', 'ble', 'barcode'] },
      ],
      [
        'tag_type wrong case',
        { tag_type: 'RFID', value: 'V' },
        [['tag_type', 'invalid_value']],
        { allowed_values: ['rfid', 'ble', 'barcode'] },
      ],
      [
        'tag_type a number',
        { tag_type: 5, value: 'V' },
        [['tag_type', 'invalid_value']],
        { expected_type: 'string', received_type: 'number' },
      ],
      ['value omitted', { tag_type: 'rfid' }, [['value', 'required']]],
      ['value null', { tag_type: 'rfid', value: null }, [['value', 'invalid_value']]],
      ['value empty', { tag_type: 'rfid', value: '' }, [['value', 'too_short']], { min_length: 1 }],
      ['value too long', { tag_type: 'rfid', value: 'v'.repeat(256) }, [['value', 'too_long']], { max_length: 255 }],
      ['value with a C0 control', { tag_type: 'ble', value: 'a\u001bb' }, [['value', 'invalid_value']]],
      ['value with DEL', { tag_type: 'ble', value: 'a\u007f' }, [['value', 'invalid_value']]],
      ['unknown field', { tag_type: 'rfid', value: 'V', is_active: true }, [['is_active', 'unknown_field']]],
      [
        'both missing',
        {},
        [
          ['tag_type', 'required'],
          ['value', 'required'],
        ],
      ],
    ];
    for (const [name, body, fields, params] of cases) {
      const res = await api.req('POST', `/api/v1/assets/${asset.id}/tags`, body);
      t.same([res.status, res.json?.error?.type, fieldCodes(res)], [400, 'validation_error', fields], name);
      if (params) t.match(res.json.error.fields[0].params, params, `${name}: params`);
    }
    const wide = await api.req('POST', `/api/v1/assets/${asset.id}/tags`, {
      tag_type: 'barcode',
      value: 'tab\there, newline\nand: any/char_ok.',
    });
    t.equal(wide.status, 201, 'values are wider than the external_key pattern');
    const contentType = await api.req(
      'POST',
      `/api/v1/assets/${asset.id}/tags`,
      { tag_type: 'rfid', value: 'x' },
      { contentType: 'application/merge-patch+json' },
    );
    t.equal(contentType.status, 415);
    t.same(await tagsOf(asset.id), [wide.json.data], 'rejected attaches left nothing behind');
  });

  t.test('(tag_type, value) is unique per organization among live tags', async (t) => {
    const a = await api.create({ name: 'A' });
    const b = await api.create({ name: 'B' });
    const value = key('SHARED');
    const first = await api.attach(a.id, { tag_type: 'rfid', value });
    for (const [name, id] of [
      ['same asset', a.id],
      ['another asset', b.id],
    ] as const) {
      const res = await api.req('POST', `/api/v1/assets/${id}/tags`, { tag_type: 'rfid', value });
      t.same([res.status, res.json.error.type], [409, 'conflict'], name);
    }
    const createKey = key('C');
    const inCreate = await api.req('POST', '/api/v1/assets', { name: 'C', external_key: createKey, tags: [{ tag_type: 'rfid', value }] });
    t.same([inCreate.status, inCreate.json.error.type], [409, 'conflict'], 'also in a create body');
    const notCreated = await api.req('GET', `/api/v1/assets?external_key=${createKey}&include_deleted=true`);
    t.same(notCreated.json.data, [], 'the rejected create left no asset');
    t.equal((await api.attach(b.id, { tag_type: 'ble', value })).value, value, 'the same value under another tag_type is fine');
    const dupInBody = await api.req('POST', '/api/v1/assets', {
      name: 'D',
      tags: [
        { tag_type: 'barcode', value: 'dup' },
        { tag_type: 'barcode', value: 'dup' },
      ],
    });
    t.same([dupInBody.status, dupInBody.json.error.type], [409, 'conflict'], 'a duplicate inside one create body');
    const search = await api.req('GET', '/api/v1/assets?q=dup');
    t.same(search.json.data, [], 'the rejected create left neither asset nor tag');
    t.equal((await api.req('DELETE', `/api/v1/assets/${a.id}/tags/${first.id}`)).status, 204);
    t.equal((await api.attach(b.id, { tag_type: 'rfid', value })).value, value, 'a detached tag frees its natural key');
  });

  t.test('a soft-deleted asset keeps its tags as rows (they still hold their natural key)', async (t) => {
    const value = key('KEEP');
    const asset = await api.create({ name: 'Doomed', tags: [{ tag_type: 'rfid', value }] });
    t.equal((await api.req('DELETE', `/api/v1/assets/${asset.id}`)).status, 204);
    const listed = await api.req('GET', `/api/v1/assets?include_deleted=true&external_key=${asset.external_key}`);
    t.same(listed.json.data[0].tags, asset.tags);
    const other = await api.create({ name: 'Other' });
    const res = await api.req('POST', `/api/v1/assets/${other.id}/tags`, { tag_type: 'rfid', value });
    t.equal(res.status, 409);
    const attachToDeleted = await api.req('POST', `/api/v1/assets/${asset.id}/tags`, { tag_type: 'ble', value: key('X') });
    t.equal(attachToDeleted.status, 404, 'no attach to a soft-deleted asset');
    const detachFromDeleted = await api.req('DELETE', `/api/v1/assets/${asset.id}/tags/${asset.tags[0].id}`);
    t.equal(detachFromDeleted.status, 404);
  });

  t.test('detach: 204, then 404; only through the owning asset', async (t) => {
    const a = await api.create({ name: 'Owner' });
    const b = await api.create({ name: 'Not owner' });
    const tag = await api.attach(a.id, { tag_type: 'ble', value: key('D') });
    const wrongOwner = await api.req('DELETE', `/api/v1/assets/${b.id}/tags/${tag.id}`);
    t.same([wrongOwner.status, wrongOwner.json.error.type], [404, 'not_found'], 'a tag not attached to this asset');
    const ok = await api.req('DELETE', `/api/v1/assets/${a.id}/tags/${tag.id}`);
    t.same([ok.status, ok.text], [204, '']);
    const repeat = await api.req('DELETE', `/api/v1/assets/${a.id}/tags/${tag.id}`);
    t.same([repeat.status, repeat.json.error.type], [404, 'not_found'], 'a repeat');
    t.same(await tagsOf(a.id), []);
    const never = await api.req('DELETE', `/api/v1/assets/${a.id}/tags/2147483647`);
    t.equal(never.status, 404);
    const badId = await api.req('DELETE', `/api/v1/assets/${a.id}/tags/0`);
    t.same([badId.status, fieldCodes(badId)], [400, [['tag_id', 'too_small']]]);
  });

  t.test("another organization's tags are invisible", async (t) => {
    const other = await api.otherOrg('Tag Rival');
    const value = key('RIVAL');
    const mine = await api.create({ name: 'Mine', tags: [{ tag_type: 'rfid', value }] });
    const theirs = await other.create({ name: 'Theirs', tags: [{ tag_type: 'rfid', value }] });
    t.equal(theirs.tags[0].value, value, 'natural keys are per organization');
    const cross = await other.req('DELETE', `/api/v1/assets/${theirs.id}/tags/${mine.tags[0].id}`);
    t.equal(cross.status, 404);
    const search = await other.req('GET', `/api/v1/assets?q=${value}`);
    t.same(
      search.json.data.map((a: any) => a.id),
      [theirs.id],
    );
    t.same(await tagsOf(mine.id), mine.tags);
  });
});
