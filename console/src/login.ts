import { post } from './api.js';
import { h, replace } from './dom.js';
import { field, showErrors } from './forms.js';
import { adopt, type Org, type Session } from './session.js';

/** The sign-in form; a user of several organizations then picks one. */
export function loginView(main: HTMLElement, notice: string | undefined, done: () => void): void {
  const email = h('input', { type: 'email', autocomplete: 'username', required: true });
  const password = h('input', { type: 'password', autocomplete: 'current-password', required: true });
  const orgSlot = h('div');
  let orgSelect: HTMLSelectElement | undefined;
  const submit = h('button', { type: 'submit' }, 'Sign in');
  const form = h(
    'form',
    { class: 'card narrow', novalidate: true },
    h('h1', { tabindex: '-1' }, 'Sign in to trackd'),
    notice ? h('p', { class: 'notice', role: 'status' }, notice) : null,
    field('Email', email, 'email'),
    field('Password', password, 'password'),
    orgSlot,
    h('p', { class: 'form-error', role: 'alert', tabindex: '-1' }),
    submit,
  );
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    submit.disabled = true;
    const body: Record<string, unknown> = { email: email.value, password: password.value };
    if (orgSelect !== undefined) body.org_id = Number(orgSelect.value);
    const r = await post<{ data: Session | { choose_org: Org[] } }>('/console/api/login', body);
    submit.disabled = false;
    if (!r.ok) return showErrors(form, r.error);
    const data = r.data.data;
    if ('choose_org' in data) {
      orgSelect = h('select', {}, ...data.choose_org.map((o) => h('option', { value: o.id }, o.name)));
      replace(orgSlot, field('Organization', orgSelect, 'org_id', 'You belong to several organizations: choose one.'));
      submit.textContent = 'Continue';
      orgSelect.focus();
      showErrors(form, undefined);
      return;
    }
    adopt(data);
    done();
  });
  replace(main, form);
  email.focus();
}
