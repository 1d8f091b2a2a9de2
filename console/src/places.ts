import { get, query, type Page, type Result } from './api.js';
import { h, replace, when } from './dom.js';
import { applyToCounts, feedPanel, notReflected, reflects, type Move } from './feed.js';

const PAGE = 50;

/** A page the feed can follow: the event sequence it reflects. */
type SeqPage<T> = Page<T> & { as_of_seq: number };

interface TreeItem {
  id: number;
  external_key: string;
  name: string;
  has_children: boolean;
  asset_count: number;
  subtree_asset_count: number;
}
interface Tag {
  id: number;
  tag_type: string;
  value: string;
}
interface Location {
  id: number;
  external_key: string;
  name: string;
  description?: string | null;
  tags: Tag[];
}
interface Asset {
  id: number;
  external_key: string;
  name: string;
  description?: string | null;
  is_active: boolean;
  tags: Tag[];
  created_at: string;
  updated_at: string;
}
interface ReportRow {
  asset_id: number;
  asset_external_key: string;
  location_id: number | null;
  location_external_key: string | null;
  asset_last_seen: string;
}
interface Visit {
  location_id: number;
  event_observed_at: string;
  last_seen_at: string;
  read_count: number;
  location: { id: number; external_key: string; name: string } | null;
}

const V1 = '/console/api/v1';

function failure(r: Result<unknown>): HTMLElement | null {
  return r.ok
    ? null
    : h('p', { class: 'form-error', role: 'alert' }, `${r.error.detail}${r.error.request_id ? ` (request ${r.error.request_id})` : ''}`);
}

/** Previous / next for a page of 50; `go` loads the page at an offset. */
function pager(page: Page<unknown>, go: (offset: number) => void, label: string): HTMLElement {
  const first = page.total_count === 0 ? 0 : page.offset + 1;
  const last = Math.min(page.offset + page.data.length, page.total_count);
  return h(
    'nav',
    { class: 'pager', 'aria-label': `${label} pages` },
    h('button', { type: 'button', disabled: page.offset === 0, onclick: () => go(Math.max(0, page.offset - PAGE)) }, '‹ Previous'),
    h('span', { class: 'muted' }, `${first}–${last} of ${page.total_count.toLocaleString()}`),
    h('button', { type: 'button', disabled: last >= page.total_count, onclick: () => go(page.offset + PAGE) }, 'Next ›'),
  );
}

function tags(list: Tag[]): HTMLElement {
  if (list.length === 0) return h('span', { class: 'muted' }, 'no tags');
  return h('ul', { class: 'tags' }, ...list.map((t) => h('li', {}, h('span', { class: 'tag-type' }, t.tag_type), ` ${t.value}`)));
}

/**
 * One page of a location's children (or of the roots) with asset counts: here, and here plus
 * below. Returns the event sequence the counts reflect (also kept on `slot`), undefined on failure.
 */
async function childList(slot: HTMLElement, parentId: number | undefined, offset = 0): Promise<number | undefined> {
  const r = await get<SeqPage<TreeItem>>(`/console/api/tree${query({ parent_id: parentId, limit: PAGE, offset })}`);
  if (!r.ok) {
    replace(slot, failure(r));
    return undefined;
  }
  const page = r.data;
  reflects(slot, page.as_of_seq);
  if (page.total_count === 0) {
    replace(slot, h('p', { class: 'muted' }, parentId === undefined ? 'No locations yet.' : 'No locations below this one.'));
    return page.as_of_seq;
  }
  replace(
    slot,
    h(
      'ul',
      { class: 'tree', 'data-nav': true, 'aria-label': parentId === undefined ? 'Top-level locations' : 'Locations below' },
      ...page.data.map((c) =>
        h(
          'li',
          { 'data-location': c.id },
          h(
            'a',
            { href: `#/locations/${c.id}`, 'data-nav-item': true },
            h('span', { class: 'name' }, c.name),
            h('span', { class: 'key' }, c.external_key),
            c.has_children ? h('span', { class: 'muted' }, ' ▸') : null,
          ),
          h(
            'span',
            { class: 'counts' },
            h(
              'span',
              { 'data-count': 'here', 'data-n': c.asset_count, title: 'Assets at this location' },
              `${c.asset_count.toLocaleString()} here`,
            ),
            h(
              'span',
              { 'data-count': 'subtree', 'data-n': c.subtree_asset_count, title: 'Assets here and below' },
              `${c.subtree_asset_count.toLocaleString()} in subtree`,
            ),
          ),
        ),
      ),
    ),
    page.total_count > PAGE ? pager(page, (o) => void childList(slot, parentId, o), 'Locations') : null,
  );
  return page.as_of_seq;
}

/** The roots with their counts, kept current by the live feed of moves. `reload` reads the view again. */
export async function treeView(main: HTMLElement, reload: () => void): Promise<void> {
  const slot = h('div');
  replace(main, h('h1', { tabindex: '-1' }, 'Locations'), slot);
  const seq = await childList(slot, undefined);
  // Left before it loaded (a newer view owns the page and its feed).
  if (seq === undefined || !main.contains(slot)) return;
  main.append(feedPanel(seq, { onMoves: (moves) => applyToCounts(slot, moves), onExpired: reload }));
}

/**
 * The assets whose current location this is (the report filtered by location), newest sighting
 * first. Returns the report's `as_of_seq` (also kept on `slot`), undefined on failure.
 */
async function assetsAt(slot: HTMLElement, locationId: number, offset = 0): Promise<number | undefined> {
  const r = await get<SeqPage<ReportRow>>(`${V1}/reports/asset-locations${query({ location_id: locationId, limit: PAGE, offset })}`);
  if (!r.ok) {
    replace(slot, failure(r));
    return undefined;
  }
  const page = r.data;
  reflects(slot, page.as_of_seq);
  if (page.total_count === 0) {
    replace(slot, h('p', { class: 'muted' }, 'No asset is here now.'));
    return page.as_of_seq;
  }
  // Names come from the asset list, filtered to this page's keys: one more page-sized read.
  const keys = page.data.map((row) => row.asset_external_key);
  const named = await get<Page<Asset>>(`${V1}/assets?${keys.map((k) => `external_key=${encodeURIComponent(k)}`).join('&')}&limit=${PAGE}`);
  const names = new Map(named.ok ? named.data.data.map((a) => [a.id, a.name]) : []);
  replace(
    slot,
    h(
      'table',
      { class: 'stack', 'data-nav': true },
      h('caption', {}, `${page.total_count.toLocaleString()} assets here`),
      h(
        'thead',
        {},
        h('tr', {}, h('th', { scope: 'col' }, 'Asset'), h('th', { scope: 'col' }, 'Key'), h('th', { scope: 'col' }, 'Last seen')),
      ),
      h(
        'tbody',
        {},
        ...page.data.map((row) =>
          h(
            'tr',
            { 'data-asset': row.asset_id },
            h(
              'td',
              { 'data-label': 'Asset' },
              h('a', { href: `#/assets/${row.asset_id}`, 'data-nav-item': true }, names.get(row.asset_id) ?? row.asset_external_key),
            ),
            h('td', { 'data-label': 'Key' }, row.asset_external_key),
            h('td', { 'data-label': 'Last seen' }, h('time', { datetime: row.asset_last_seen }, when(row.asset_last_seen))),
          ),
        ),
      ),
    ),
    pager(page, (o) => void assetsAt(slot, locationId, o), 'Assets'),
  );
  return page.as_of_seq;
}

export async function locationView(main: HTMLElement, id: number, reload: () => void): Promise<void> {
  const [loc, chain] = await Promise.all([
    get<{ data: Location }>(`${V1}/locations/${id}`),
    get<Page<Location>>(`${V1}/locations/${id}/ancestors?limit=200`),
  ]);
  if (!loc.ok) return replace(main, h('h1', { tabindex: '-1' }, 'Location'), failure(loc));
  const l = loc.data.data;
  const crumbs = chain.ok ? chain.data.data : [];
  const children = h('div');
  const assets = h('div');
  replace(
    main,
    h(
      'nav',
      { class: 'crumbs', 'aria-label': 'Breadcrumb' },
      h('a', { href: '#/locations' }, 'Locations'),
      ...crumbs.flatMap((c) => [' / ', h('a', { href: `#/locations/${c.id}` }, c.name)]),
      ' / ',
      h('span', { 'aria-current': 'page' }, l.name),
    ),
    h('h1', { tabindex: '-1' }, l.name, ' ', h('span', { class: 'key' }, l.external_key)),
    l.description ? h('p', {}, l.description) : null,
    tags(l.tags),
    h('section', { 'aria-labelledby': 'below' }, h('h2', { id: 'below' }, 'Below this location'), children),
    h('section', { 'aria-labelledby': 'here' }, h('h2', { id: 'here' }, 'Assets here now'), assets),
  );
  const [below, here] = await Promise.all([childList(children, id), assetsAt(assets, id)]);
  if (below === undefined || here === undefined || !main.contains(children)) return;
  // This location's moves, and those into, out of or between the locations listed below it.
  const touches = (m: Move, ids: Set<number>) => [m.from, m.to, ...m.entered, ...m.left].some((r) => r !== null && ids.has(r.id));
  const listed = () =>
    new Set([id, ...[...children.querySelectorAll<HTMLElement>('li[data-location]')].map((li) => Number(li.dataset.location))]);
  // From the older of the two reads; each part then takes only the moves it does not reflect yet.
  const feed = feedPanel(Math.min(below, here), {
    shows: (m) => touches(m, listed()),
    onMoves: (moves) => {
      applyToCounts(children, moves);
      // The list of assets here is read again (one page, the report's own order) when a move enters or leaves it.
      if (notReflected(assets, moves).some((m) => m.to.id === id || m.from?.id === id)) void assetsAt(assets, id);
    },
    onExpired: reload,
  });
  main.append(feed);
}

/** Search by name, external key or tag value (the asset list's q), pages of 50. */
export async function searchView(main: HTMLElement, q: string, offset = 0): Promise<void> {
  const input = h('input', { type: 'search', value: q, placeholder: 'Name, external key or tag value', 'aria-label': 'Search assets' });
  const form = h('form', { role: 'search', class: 'row' }, input, h('button', { type: 'submit' }, 'Search'));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    location.hash = `#/search?q=${encodeURIComponent(input.value)}`;
  });
  const results = h('div');
  replace(main, h('h1', { tabindex: '-1' }, 'Search assets'), form, results);
  input.focus();
  if (q === '') return;
  const r = await get<Page<Asset>>(`${V1}/assets${query({ q, limit: PAGE, offset })}`);
  if (!r.ok) return replace(results, failure(r));
  const page = r.data;
  if (page.total_count === 0) return replace(results, h('p', { class: 'muted' }, `Nothing matches “${q}”.`));
  replace(
    results,
    h(
      'ul',
      { class: 'results', 'data-nav': true },
      ...page.data.map((a) =>
        h(
          'li',
          {},
          h(
            'a',
            { href: `#/assets/${a.id}`, 'data-nav-item': true },
            h('span', { class: 'name' }, a.name),
            h('span', { class: 'key' }, a.external_key),
          ),
          ' ',
          tags(a.tags),
        ),
      ),
    ),
    pager(page, (o) => void searchView(main, q, o), 'Results'),
  );
}

async function timeline(slot: HTMLElement, assetId: number, offset = 0): Promise<void> {
  const r = await get<Page<Visit>>(`${V1}/assets/${assetId}/history${query({ limit: PAGE, offset })}`);
  if (!r.ok) return replace(slot, failure(r));
  const page = r.data;
  if (page.total_count === 0) return replace(slot, h('p', { class: 'muted' }, 'Never scanned.'));
  replace(
    slot,
    h(
      'ol',
      { class: 'timeline', 'data-nav': true },
      ...page.data.map((v, i) =>
        h(
          'li',
          { class: i === 0 && offset === 0 ? 'now' : '' },
          h('time', { datetime: v.event_observed_at }, when(v.event_observed_at)),
          v.location
            ? h(
                'a',
                { href: `#/locations/${v.location.id}`, 'data-nav-item': true },
                v.location.name,
                ' ',
                h('span', { class: 'key' }, v.location.external_key),
              )
            : h('span', { class: 'muted' }, `location ${v.location_id} (no longer current)`),
          h('span', { class: 'muted' }, ` · last seen ${when(v.last_seen_at)} · ${v.read_count} reads`),
        ),
      ),
    ),
    pager(page, (o) => void timeline(slot, assetId, o), 'History'),
  );
}

/** Where an asset is now and when it was last seen: the report's row of it, with the sequence it reflects. */
async function whereNow(nowAt: HTMLElement, lastSeen: HTMLElement, assetId: number): Promise<number | undefined> {
  const r = await get<SeqPage<ReportRow>>(`${V1}/reports/asset-locations${query({ asset_id: assetId, limit: 1 })}`);
  if (!r.ok) {
    replace(nowAt, failure(r));
    return undefined;
  }
  const row = r.data.data[0];
  replace(
    nowAt,
    row?.location_id
      ? h('a', { href: `#/locations/${row.location_id}` }, row.location_external_key ?? `location ${row.location_id}`)
      : 'never scanned',
  );
  replace(lastSeen, row ? h('time', { datetime: row.asset_last_seen }, when(row.asset_last_seen)) : '—');
  return r.data.as_of_seq;
}

/** An asset: its tags, where it is now and its history, kept current by the live feed of its moves. */
export async function assetView(main: HTMLElement, id: number, reload: () => void): Promise<void> {
  const nowAt = h('dd', { 'data-now-at': true });
  const lastSeen = h('dd', { 'data-last-seen': true });
  const [asset, seq] = await Promise.all([get<{ data: Asset }>(`${V1}/assets/${id}`), whereNow(nowAt, lastSeen, id)]);
  if (!asset.ok) return replace(main, h('h1', { tabindex: '-1' }, 'Asset'), failure(asset));
  const a = asset.data.data;
  const history = h('div');
  replace(
    main,
    h(
      'nav',
      { class: 'crumbs', 'aria-label': 'Breadcrumb' },
      h('a', { href: '#/search' }, 'Assets'),
      ' / ',
      h('span', { 'aria-current': 'page' }, a.name),
    ),
    h('h1', { tabindex: '-1' }, a.name, ' ', h('span', { class: 'key' }, a.external_key)),
    h(
      'dl',
      { class: 'facts' },
      h('dt', {}, 'Now at'),
      nowAt,
      h('dt', {}, 'Last seen'),
      lastSeen,
      h('dt', {}, 'Active'),
      h('dd', {}, a.is_active ? 'yes' : 'no'),
      a.description ? h('dt', {}, 'Description') : null,
      a.description ? h('dd', {}, a.description) : null,
      h('dt', {}, 'Tags'),
      h('dd', {}, tags(a.tags)),
    ),
    h('section', { 'aria-labelledby': 'hist' }, h('h2', { id: 'hist' }, 'History'), history),
  );
  await timeline(history, id);
  if (seq === undefined || !main.contains(history)) return;
  // Its moves after the report's as_of_seq: where it is and its history are read again (one row, one page).
  const feed = feedPanel(seq, {
    shows: (m) => m.asset.id === id,
    onMoves: () => {
      void whereNow(nowAt, lastSeen, id);
      void timeline(history, id);
    },
    onExpired: reload,
  });
  main.append(feed);
}
