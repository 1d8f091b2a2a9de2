import { whenSessionEnds } from './api.js';
import { arrowNavigation, h, replace } from './dom.js';
import { keysView } from './keys.js';
import { loginView } from './login.js';
import { stopFeed } from './feed.js';
import { assetView, locationView, searchView, treeView } from './places.js';
import { current, load, logout, switchOrg } from './session.js';

const main = document.getElementById('main') as HTMLElement;
const top = document.getElementById('top') as HTMLElement;

function header(): void {
  const s = current;
  if (s === undefined) {
    top.hidden = true;
    return;
  }
  const route = location.hash.split('/')[1] ?? '';
  const link = (href: string, label: string, name: string) => h('a', { href, 'aria-current': route === name ? 'page' : undefined }, label);
  const org =
    s.orgs.length > 1
      ? h(
          'select',
          {
            'aria-label': 'Organization',
            onchange: async (e: Event) => {
              if (await switchOrg(Number((e.target as HTMLSelectElement).value))) void render();
            },
          },
          ...s.orgs.map((o) => h('option', { value: o.id, selected: o.id === s.org.id }, o.name)),
        )
      : h('span', { class: 'org' }, s.org.name);
  replace(
    top,
    h('a', { class: 'brand', href: '#/locations' }, 'trackd'),
    h(
      'nav',
      { 'aria-label': 'Main' },
      link('#/locations', 'Locations', 'locations'),
      link('#/search', 'Search', 'search'),
      link('#/keys', 'API keys', 'keys'),
    ),
    h(
      'div',
      { class: 'account' },
      org,
      h('span', { class: 'muted user' }, s.user.email),
      h(
        'button',
        {
          type: 'button',
          onclick: async () => {
            await logout();
            location.hash = '#/login';
          },
        },
        'Sign out',
      ),
    ),
  );
  top.hidden = false;
}

async function render(notice?: string): Promise<void> {
  stopFeed();
  if (current === undefined) await load();
  if (current === undefined) {
    header();
    document.title = 'Sign in · trackd';
    return loginView(main, notice, () => {
      if (location.hash === '' || location.hash.startsWith('#/login')) location.hash = '#/locations';
      else void render();
    });
  }
  header();
  const [path = '', search = ''] = location.hash.slice(1).split('?');
  const parts = path.split('/').filter(Boolean);
  const params = new URLSearchParams(search);
  main.setAttribute('aria-busy', 'true');
  switch (parts[0]) {
    case 'keys':
      document.title = 'API keys · trackd';
      await keysView(main);
      break;
    case 'search':
      document.title = 'Search · trackd';
      await searchView(main, params.get('q') ?? '');
      break;
    case 'assets':
      document.title = 'Asset · trackd';
      await assetView(main, Number(parts[1]), reload);
      break;
    case 'locations':
      document.title = 'Locations · trackd';
      if (parts[1] !== undefined) await locationView(main, Number(parts[1]), reload);
      else await treeView(main, reload);
      break;
    default:
      location.hash = '#/locations';
      return;
  }
  main.removeAttribute('aria-busy');
  // After a navigation, focus goes to the new page's heading (screen readers announce it; Tab starts there).
  if (!main.contains(document.activeElement) || document.activeElement === main) main.querySelector<HTMLElement>('h1')?.focus();
}

/** Reads the current view again (the live feed's cursor fell out of the event log's retention). */
const reload = () => void render();

whenSessionEnds((detail) => {
  if (current === undefined) return;
  void load().then(() => {
    if (current === undefined) void render(detail);
  });
});
arrowNavigation(main);
window.addEventListener('hashchange', () => void render());
void render();
