/** A tiny element builder: attributes (on* are listeners), then children (strings become text). */
type Child = Node | string | number | null | undefined | false;
type Attrs = Record<string, string | number | boolean | EventListener | undefined>;

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === false) continue;
    if (name.startsWith('on') && typeof value === 'function') el.addEventListener(name.slice(2), value);
    else if (value === true) el.setAttribute(name, '');
    else el.setAttribute(name, String(value));
  }
  append(el, ...children);
  return el;
}

export function append(el: Node, ...children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    el.appendChild(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
  }
}

export function replace(el: Element, ...children: Child[]): void {
  el.replaceChildren();
  append(el, ...children);
}

export const when = (iso: string | null | undefined) => (iso ? new Date(iso).toLocaleString() : '—');

/** Arrow keys move between the focusable rows of a list marked data-nav (Home/End jump). */
export function arrowNavigation(root: HTMLElement): void {
  root.addEventListener('keydown', (event) => {
    const e = event as KeyboardEvent;
    if (!['ArrowDown', 'ArrowUp', 'Home', 'End'].includes(e.key)) return;
    const list = (e.target as HTMLElement).closest('[data-nav]');
    if (list === null) return;
    const items = [...list.querySelectorAll<HTMLElement>('[data-nav-item]')];
    const at = items.indexOf(e.target as HTMLElement);
    if (at < 0) return;
    const next = e.key === 'Home' ? 0 : e.key === 'End' ? items.length - 1 : at + (e.key === 'ArrowDown' ? 1 : -1);
    const target = items[Math.max(0, Math.min(items.length - 1, next))];
    if (target !== undefined) {
      e.preventDefault();
      target.focus();
    }
  });
}

export function announce(text: string): void {
  const live = document.getElementById('live');
  if (live !== null) live.textContent = text;
}
