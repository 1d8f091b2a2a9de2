import type { ApiErrorBody } from './api.js';
import { h, replace } from './dom.js';

/** A labelled input with a slot for its error, linked by aria-describedby. */
export function field(label: string, input: HTMLInputElement | HTMLSelectElement, name: string, hint?: string): HTMLElement {
  const id = `f-${name}`;
  input.id = id;
  input.name = name;
  input.setAttribute('aria-describedby', `${id}-error${hint ? ` ${id}-hint` : ''}`);
  return h(
    'div',
    { class: 'field', 'data-field': name },
    h('label', { for: id }, label),
    input,
    hint ? h('small', { id: `${id}-hint`, class: 'muted' }, hint) : null,
    h('p', { id: `${id}-error`, class: 'field-error', 'data-error-for': name, role: 'alert' }),
  );
}

/** Shows each of the API's fields[] beside its field (scopes[2] beside scopes), the rest in the form's summary. */
export function showErrors(form: HTMLElement, error: ApiErrorBody | undefined): void {
  for (const slot of form.querySelectorAll<HTMLElement>('[data-error-for]')) slot.textContent = '';
  for (const el of form.querySelectorAll('[aria-invalid]')) el.removeAttribute('aria-invalid');
  const summary = form.querySelector<HTMLElement>('.form-error');
  if (summary !== null) replace(summary);
  if (error === undefined) return;
  const unplaced: string[] = [];
  let first: HTMLElement | null = null;
  for (const f of error.fields ?? []) {
    const name = f.field.replace(/\[\d+\]$/, '');
    const slot = form.querySelector<HTMLElement>(`[data-error-for="${CSS.escape(name)}"]`);
    if (slot === null) {
      unplaced.push(`${f.field}: ${f.message}`);
      continue;
    }
    slot.textContent = slot.textContent ? `${slot.textContent} ${f.message}` : f.message;
    const input = form.querySelector<HTMLElement>(`[name="${CSS.escape(name)}"]`);
    input?.setAttribute('aria-invalid', 'true');
    first ??= input;
  }
  if (summary !== null && (error.fields === undefined || unplaced.length > 0)) {
    replace(summary, error.fields === undefined ? error.detail : unplaced.join('; '));
    if (error.request_id) summary.append(h('small', { class: 'muted' }, ` (request ${error.request_id})`));
  }
  (first ?? summary)?.focus?.();
}
