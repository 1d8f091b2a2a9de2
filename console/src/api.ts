/** The console's calls to its server: same origin, session cookie, CSRF token on writes, errors in the API's envelope. */
export interface FieldError {
  field: string;
  code: string;
  message: string;
}

export interface ApiErrorBody {
  type: string;
  title: string;
  status: number;
  detail: string;
  request_id: string;
  fields?: FieldError[];
}

export type Result<T> = { ok: true; status: number; data: T } | { ok: false; status: number; error: ApiErrorBody };

export interface Page<T> {
  data: T[];
  limit: number;
  offset: number;
  total_count: number;
}

let csrfToken = '';
let onSessionEnded: (detail: string) => void = () => undefined;

export function setCsrf(token: string): void {
  csrfToken = token;
}

export function whenSessionEnds(handler: (detail: string) => void): void {
  onSessionEnded = handler;
}

export async function call<T>(method: string, path: string, body?: unknown): Promise<Result<T>> {
  const headers: Record<string, string> = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (method !== 'GET') headers['X-CSRF-Token'] = csrfToken;
  let res: Response;
  try {
    res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'same-origin' });
  } catch {
    const error = {
      type: 'network',
      title: 'Network error',
      status: 0,
      detail: 'The server could not be reached; check the connection and try again.',
      request_id: '',
    };
    return { ok: false, status: 0, error };
  }
  const text = await res.text();
  const parsed = (text === '' ? {} : JSON.parse(text)) as { error?: ApiErrorBody } & T;
  if (res.ok) return { ok: true, status: res.status, data: parsed as T };
  const error = parsed.error ?? { type: 'http', title: res.statusText, status: res.status, detail: res.statusText, request_id: '' };
  // A session that ended (logout elsewhere, expiry) sends the person back to the sign-in form; a failed sign-in does not.
  if (res.status === 401 && !path.endsWith('/login')) onSessionEnded(error.detail);
  return { ok: false, status: res.status, error };
}

export const get = <T>(path: string) => call<T>('GET', path);
export const post = <T>(path: string, body?: unknown) => call<T>('POST', path, body ?? {});

export function query(params: Record<string, string | number | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== '') q.set(k, String(v));
  const text = q.toString();
  return text === '' ? '' : `?${text}`;
}
