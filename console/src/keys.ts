import { get, post } from './api.js';
import { announce, h, replace, when } from './dom.js';
import { field, showErrors } from './forms.js';
import { current } from './session.js';

interface Key {
  api_key_id: string;
  name: string;
  scopes: string[];
  env: string;
  created_at: string;
  expires_at: string | null;
  revoked_at: string | null;
  last_used_at: string | null;
}

const RESOURCES = [
  { name: 'assets', label: 'Assets', access: ['read', 'write'] },
  { name: 'locations', label: 'Locations', access: ['read', 'write'] },
  { name: 'tracking', label: 'Tracking (current locations, history)', access: ['read'] },
  { name: 'webhooks', label: 'Webhooks (endpoints, delivery log)', access: ['read', 'write'] },
];
const EXPIRY = [
  ['30d', '30 days'],
  ['90d', '90 days'],
  ['365d', '1 year'],
  ['7d', '7 days'],
  ['never', 'Never'],
];

function status(k: Key): string {
  if (k.revoked_at) return `revoked ${when(k.revoked_at)}`;
  if (k.expires_at && new Date(k.expires_at).getTime() <= Date.now()) return 'expired';
  return 'active';
}

/** API keys: the list, the new-key form (token shown once, with a copy button), revoke with confirmation. */
export async function keysView(main: HTMLElement): Promise<void> {
  const listSlot = h('div', { 'aria-busy': 'true' });
  const formSlot = h('section', { class: 'card', 'aria-labelledby': 'new-key' });
  replace(
    main,
    h('h1', { tabindex: '-1' }, 'API keys'),
    h(
      'p',
      { class: 'muted' },
      `Organization ${current?.org.name ?? ''}, ${current?.env ?? ''} environment. Keys are shown once; trackd keeps only their ids.`,
    ),
    formSlot,
    listSlot,
  );
  const refresh = async () => {
    const r = await get<{ data: Key[] }>('/console/api/keys');
    listSlot.removeAttribute('aria-busy');
    if (!r.ok) return replace(listSlot, h('p', { class: 'form-error' }, r.error.detail));
    replace(listSlot, keyTable(r.data.data, refresh));
  };
  replace(formSlot, newKeyForm(refresh));
  await refresh();
}

function keyTable(keys: Key[], refresh: () => Promise<void>): HTMLElement {
  if (keys.length === 0) return h('p', { class: 'muted' }, 'No keys yet.');
  return h(
    'table',
    { class: 'stack' },
    h('caption', {}, `${keys.length} keys`),
    h(
      'thead',
      {},
      h('tr', {}, ...['Name', 'Scopes', 'Created', 'Expires', 'Last used', 'Status', ''].map((t) => h('th', { scope: 'col' }, t))),
    ),
    h(
      'tbody',
      {},
      ...keys.map((k) =>
        h(
          'tr',
          { 'data-key': k.api_key_id },
          h('td', { 'data-label': 'Name' }, k.name),
          h('td', { 'data-label': 'Scopes' }, k.scopes.join(', ')),
          h('td', { 'data-label': 'Created' }, when(k.created_at)),
          h('td', { 'data-label': 'Expires' }, k.expires_at ? when(k.expires_at) : 'never'),
          h(
            'td',
            { 'data-label': 'Last used', title: 'Recorded to the minute' },
            k.last_used_at ? h('time', { datetime: k.last_used_at }, when(k.last_used_at)) : 'never',
          ),
          h('td', { 'data-label': 'Status', class: k.revoked_at ? 'revoked' : '' }, status(k)),
          h(
            'td',
            {},
            k.revoked_at ? null : h('button', { type: 'button', class: 'danger', onclick: () => confirmRevoke(k, refresh) }, `Revoke`),
          ),
        ),
      ),
    ),
  );
}

function confirmRevoke(k: Key, refresh: () => Promise<void>): void {
  const error = h('p', { class: 'form-error', role: 'alert' });
  const yes = h('button', { type: 'button', class: 'danger', value: 'revoke' }, 'Revoke key');
  const no = h('button', { type: 'button' }, 'Cancel');
  const dialog = h(
    'dialog',
    { 'aria-labelledby': 'revoke-title' },
    h('h2', { id: 'revoke-title' }, `Revoke “${k.name}”?`),
    h('p', {}, 'Every request made with this key is refused within a second. This cannot be undone.'),
    error,
    h('div', { class: 'actions' }, no, yes),
  );
  no.addEventListener('click', () => dialog.close());
  dialog.addEventListener('close', () => dialog.remove());
  yes.addEventListener('click', async () => {
    yes.disabled = true;
    const r = await post('/console/api/keys/revoke', { api_key_id: k.api_key_id });
    if (!r.ok) {
      yes.disabled = false;
      error.textContent = r.error.detail;
      return;
    }
    dialog.close();
    announce(`Key ${k.name} revoked`);
    await refresh();
  });
  document.body.append(dialog);
  dialog.showModal();
  no.focus();
}

function newKeyForm(refresh: () => Promise<void>): HTMLElement {
  const name = h('input', { type: 'text', maxlength: '255', placeholder: 'e.g. dock-3 reader sync' });
  const expiry = h('select', {}, ...EXPIRY.map(([v, label]) => h('option', { value: v }, label)));
  const org = h(
    'select',
    {},
    ...(current?.orgs ?? []).map((o) => h('option', { value: o.id, selected: o.id === current?.org.id }, o.name)),
  );
  const scopeBoxes = RESOURCES.map((r) =>
    h(
      'div',
      { class: 'scope-row' },
      h('span', {}, r.label),
      ...r.access.map((a) =>
        h('label', {}, h('input', { type: 'checkbox', name: 'scopes', value: `${r.name}:${a}`, checked: a === 'read' }), ` ${a}`),
      ),
    ),
  );
  const result = h('div', { 'aria-live': 'polite' });
  const form = h(
    'form',
    { novalidate: true },
    h('h2', { id: 'new-key' }, 'New key'),
    field('Name', name, 'name'),
    h(
      'fieldset',
      { 'data-field': 'scopes' },
      h('legend', {}, 'Scopes'),
      ...scopeBoxes,
      h('p', { class: 'field-error', 'data-error-for': 'scopes', role: 'alert' }),
    ),
    h('div', { class: 'row' }, field('Expires in', expiry, 'expires_in'), field('Organization', org, 'org_id')),
    h('p', { class: 'form-error', role: 'alert', tabindex: '-1' }),
    h('button', { type: 'submit' }, 'Create key'),
    result,
  );
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const scopes = [...form.querySelectorAll<HTMLInputElement>('input[name="scopes"]:checked')].map((c) => c.value);
    const r = await post<{ data: { token: string; api_key_id: string; expires_at: string | null } }>('/console/api/keys', {
      name: name.value,
      scopes,
      expires_in: expiry.value,
      org_id: Number(org.value),
    });
    if (!r.ok) {
      replace(result);
      return showErrors(form, r.error);
    }
    showErrors(form, undefined);
    const token = h('input', {
      type: 'text',
      readonly: true,
      value: r.data.data.token,
      class: 'token',
      'aria-label': 'The new key',
      id: 'new-token',
    });
    const copy = h('button', { type: 'button' }, 'Copy');
    copy.addEventListener('click', async () => {
      token.select();
      try {
        await navigator.clipboard.writeText(token.value);
        copy.textContent = 'Copied';
      } catch {
        copy.textContent = 'Press Ctrl+C';
      }
    });
    replace(
      result,
      h(
        'div',
        { class: 'once' },
        h('p', {}, h('strong', {}, 'Copy this key now. '), 'It is shown once; trackd cannot show it again.'),
        h('div', { class: 'row' }, token, copy),
      ),
    );
    name.value = '';
    copy.focus();
    await refresh();
  });
  return form;
}
