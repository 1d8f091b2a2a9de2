import { get } from './api.js';
import { h, replace, when } from './dom.js';

/** A location or asset as events name it. */
export interface Ref {
  id: number;
  external_key: string;
}

/** The data of an `asset.moved` event, with its sequence. */
export interface Move {
  seq: number;
  asset: Ref;
  from: Ref | null;
  to: Ref;
  observed_at: string;
  entered: Ref[];
  left: Ref[];
}

interface EventPage {
  data: { seq: number; type: string; data: Omit<Move, 'seq'> }[];
  next_after: number;
  last_seq: number;
}

const EVENTS = '/console/api/v1/events';
/** The poll period while caught up; after a failed poll the wait doubles up to the ceiling. */
const POLL_MS = 1000;
const RETRY_CEILING_MS = 8000;
const PAGE = 200;
/** Moves the live list keeps (newest first). */
const SHOWN = 50;

let stopActive: () => void = () => undefined;
/** Set when a feed's cursor expired: the view read again says so in its feed's status. */
let expiredAt: number | undefined;

/** Stops the feed of the view being left (navigation, sign-out). */
export function stopFeed(): void {
  stopActive();
  stopActive = () => undefined;
}

export interface FeedOptions {
  /** The moves this view lists (default: every move of the organization). */
  shows?: (m: Move) => boolean;
  /** A batch of new moves, oldest first (after they are listed). */
  onMoves: (moves: Move[]) => void;
  /** The cursor fell out of the log's retention: the view must be read again. */
  onExpired: () => void;
}

/** The sequence a view's part reflects (its `as_of_seq`), kept on its element: moves up to it are in it already. */
export function reflects(el: HTMLElement, seq: number): void {
  el.dataset.asOfSeq = String(seq);
}

/** The moves `el` does not reflect yet (after its `as_of_seq`, all of them when it has none). */
export function notReflected(el: HTMLElement, moves: Move[]): Move[] {
  const asOf = Number(el.dataset.asOfSeq ?? -1);
  return moves.filter((m) => m.seq > asOf);
}

/**
 * The live feed panel: follows the event log from `after` (the lowest `as_of_seq` of the view's
 * reads) with a short poll, lists each move, and hands them to the view, which applies to each of
 * its parts only the moves after that part's own `as_of_seq`. After a network drop it keeps its
 * cursor and resumes from the last sequence it applied, so no move is missed or applied twice.
 */
export function feedPanel(after: number, options: FeedOptions): HTMLElement {
  stopFeed();
  const resumed = expiredAt;
  expiredAt = undefined;
  const liveText = resumed === undefined ? 'Live' : `Live (counts read again: the moves after #${resumed} were no longer in the event log)`;
  const status = h(
    'p',
    { class: 'muted feed-status', 'data-feed-status': 'live', 'data-feed-resumed': resumed === undefined ? undefined : 'expired' },
    liveText,
  );

  const list = h('ol', { class: 'feed', 'aria-label': 'Moves, newest first' });
  const empty = h('li', { class: 'muted' }, 'No moves since this page loaded.');
  list.append(empty);
  const panel = h(
    'section',
    { class: 'live-feed', 'aria-labelledby': 'feed-title' },
    h('h2', { id: 'feed-title' }, 'Live moves'),
    status,
    list,
  );
  let cursor = after;
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let wait = POLL_MS;

  const setStatus = (state: 'live' | 'offline', text: string) => {
    status.dataset.feedStatus = state;
    replace(status, text);
  };

  const tick = async () => {
    const r = await get<EventPage>(`${EVENTS}?after=${cursor}&limit=${PAGE}`);
    if (stopped) return;
    if (!r.ok) {
      if (r.status === 410) {
        stopFeed();
        expiredAt = cursor;
        return options.onExpired();
      }
      if (r.status === 401) return; // the session ended: the console returns to sign-in
      setStatus('offline', `Connection lost; retrying (resumes after move #${cursor})`);
      wait = Math.min(wait * 2, RETRY_CEILING_MS);
      timer = setTimeout(() => void tick(), wait);
      return;
    }
    wait = POLL_MS;
    setStatus('live', liveText);
    const moves = r.data.data
      .filter((e) => e.type === 'asset.moved')
      .map((e) => ({ ...e.data, seq: e.seq }))
      .filter(options.shows ?? (() => true));
    cursor = r.data.next_after;
    if (moves.length > 0) {
      empty.remove();
      for (const m of moves) list.prepend(moveItem(m));
      while (list.children.length > SHOWN) list.lastElementChild?.remove();
      options.onMoves(moves);
    }
    // Behind the head: read the next page now; caught up: poll again shortly.
    timer = setTimeout(() => void tick(), r.data.next_after < r.data.last_seq ? 0 : POLL_MS);
  };
  stopActive = () => {
    stopped = true;
    clearTimeout(timer);
  };
  timer = setTimeout(() => void tick(), 0);
  return panel;
}

const place = (r: Ref | null) =>
  r === null ? h('span', { class: 'muted' }, 'nowhere') : h('a', { href: `#/locations/${r.id}` }, r.external_key);

function moveItem(m: Move): HTMLElement {
  return h(
    'li',
    { 'data-move': m.seq, 'data-asset': m.asset.id },
    h('a', { href: `#/assets/${m.asset.id}`, class: 'name' }, m.asset.external_key),
    ' ',
    place(m.from),
    ' → ',
    place(m.to),
    ' ',
    h('time', { class: 'muted', datetime: m.observed_at }, when(m.observed_at)),
  );
}

/**
 * Applies moves to the tree rows in `root` (data-location, data-count here / subtree) without
 * reading them again: only those after the sequence its counts were read at.
 */
export function applyToCounts(root: HTMLElement, moves: Move[]): void {
  for (const m of notReflected(root, moves)) {
    const delta = new Map<number, { here: number; subtree: number }>();
    const at = (id: number) => delta.get(id) ?? delta.set(id, { here: 0, subtree: 0 }).get(id)!;
    at(m.to.id).here += 1;
    if (m.from !== null) at(m.from.id).here -= 1;
    for (const l of m.entered) at(l.id).subtree += 1;
    for (const l of m.left) at(l.id).subtree -= 1;
    for (const [id, d] of delta) {
      const row = root.querySelector<HTMLElement>(`li[data-location="${id}"]`);
      if (row === null) continue;
      bump(row.querySelector('[data-count="here"]'), d.here, 'here');
      bump(row.querySelector('[data-count="subtree"]'), d.subtree, 'in subtree');
      row.classList.remove('moved');
      void row.offsetWidth; // restart the highlight
      row.classList.add('moved');
    }
  }
}

function bump(el: HTMLElement | null, by: number, label: string): void {
  if (el === null || by === 0) return;
  const n = Number(el.dataset.n) + by;
  el.dataset.n = String(n);
  el.textContent = `${n.toLocaleString()} ${label}`;
}
