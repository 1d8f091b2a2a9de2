import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Database from 'better-sqlite3';
import t from 'tap';
import { launchChromium, screenshotPath } from '../helpers/browser.js';
import { createUser, PASSWORD } from '../helpers/console.js';
import { drained, natsClient, publish, scanBody } from '../helpers/scans.js';
import { ALL_SCOPES, eventually, startTrackd } from '../helpers/trackd.js';

/**
 * The console in a real browser (Debian's headless Chromium): what a person does, from the sign-in
 * form to an asset's history, against a trackd with real scans. Each view leaves a screenshot.
 */
t.test('without Chromium the browser tests fail, naming the command that installs it', async (t) => {
  await t.rejects(launchChromium(t, '/nonexistent/chromium'), { message: /install it with: apt-get install -y chromium$/ });
});

t.test('the console in headless Chromium', async (t) => {
  const trackd = await startTrackd(t, { env: { HTTP_THREADS: '1' } });
  const acme = await trackd.createOrg('Acme Logistics');
  const beta = await trackd.createOrg('Beta Freight');
  createUser(trackd, 'ann@example.com', [acme.id, beta.id]);
  const writer = await trackd.createKey(acme.id, ALL_SCOPES);
  const post = async (path: string, body: unknown) => {
    const res = await trackd.request('POST', path, { token: writer.token, body });
    if (res.status !== 201) throw new Error(`${path}: ${res.status} ${res.text}`);
    return res.json.data;
  };
  const site = await post('/api/v1/locations', { external_key: 'SITE-A', name: 'Site A' });
  const dock3 = await post('/api/v1/locations', { external_key: 'DOCK-3', name: 'Dock 3', parent_id: site.id });
  const dock4 = await post('/api/v1/locations', { external_key: 'DOCK-4', name: 'Dock 4', parent_id: site.id });
  await post('/api/v1/locations', { external_key: 'YARD', name: 'Yard' });
  const forklift = await post('/api/v1/assets', {
    external_key: 'FORKLIFT-7',
    name: 'Forklift 7',
    tags: [{ tag_type: 'rfid', value: 'E28011600000020A1B2C3D4E' }],
  });
  await post('/api/v1/assets', { external_key: 'PALLET-12', name: 'Pallet 12', tags: [{ tag_type: 'barcode', value: 'PAL0012' }] });
  await post('/api/v1/assets', { external_key: 'CART-2', name: 'Cart 2', tags: [{ tag_type: 'ble', value: 'AC:23:3F:00:00:02' }] });
  const scan = (location: string, tag: string) =>
    trackd.cli(['scans', 'publish', '--org', String(acme.id), '--location', location, '--tag', tag]);
  await scan('DOCK-4', 'rfid:E28011600000020A1B2C3D4E');
  await scan('DOCK-3', 'rfid:E28011600000020A1B2C3D4E');
  await scan('DOCK-3', 'barcode:PAL0012');
  await scan('SITE-A', 'ble:AC:23:3F:00:00:02');
  await eventually(async () => {
    const r = await trackd.request('GET', '/api/v1/reports/asset-locations', { token: writer.token });
    return (
      r.json.total_count === 3 && r.json.data.some((row: any) => row.asset_id === forklift.id && row.location_external_key === 'DOCK-3')
    );
  }, 15_000);

  const context = await launchChromium(t);
  const page = await context.newPage();
  const requests: string[] = [];
  page.on('request', (r) => requests.push(r.url()));
  const consoleErrors: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') consoleErrors.push(m.text());
  });
  const base = trackd.baseUrl;
  let mintedId = '';

  t.test('sign in, choosing one of two organizations', async (t) => {
    await page.goto(`${base}/console/`);
    await page.getByLabel('Email').fill('ann@example.com');
    await page.getByLabel('Password').fill('not the password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('.form-error', { hasText: 'Wrong email or password' }).waitFor();
    await page.getByLabel('Password').fill(PASSWORD);
    await page.screenshot({ path: screenshotPath('login') });
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByLabel('Organization').selectOption(String(acme.id));
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.getByRole('heading', { name: 'Locations' }).waitFor();
    t.equal(await page.locator('header select[aria-label="Organization"]').inputValue(), String(acme.id), 'signed in to Acme');
    const cookies = await context.cookies();
    const session = cookies.find((c) => c.name === 'trackd_session');
    t.ok(session?.httpOnly, 'the session cookie is HttpOnly');
    t.equal(session?.sameSite, 'Strict');
    t.equal(await page.evaluate('document.cookie'), '', 'page script cannot read the session');
  });

  t.test('a validation error shows beside its field', async (t) => {
    await page.getByRole('link', { name: 'API keys' }).click();
    await page.getByRole('heading', { name: 'New key' }).waitFor();
    for (const box of await page.locator('input[name="scopes"]').all()) await box.uncheck();
    await page.getByRole('button', { name: 'Create key' }).click();
    const nameError = page.locator('[data-error-for="name"]');
    await nameError.filter({ hasText: /\S/ }).waitFor();
    t.match(await nameError.textContent(), /at least 1|too short|empty|character/i, 'the name error sits under the name field');
    t.ok(((await page.locator('[data-error-for="scopes"]').textContent()) ?? '').length > 0, 'the scopes error sits under the scopes');
    t.equal(await page.getByLabel('Name').getAttribute('aria-invalid'), 'true');
    t.equal(await page.evaluate("document.activeElement?.getAttribute('name')"), 'name', 'focus moves to the first bad field');
    await page.screenshot({ path: screenshotPath('keys-validation'), fullPage: true });
  });

  t.test('mint a key, use it on the public API, revoke it: refused within a second', async (t) => {
    await page.getByLabel('Name').fill('dock-3 reader sync');
    await page.locator('input[value="assets:read"]').check();
    await page.locator('input[value="tracking:read"]').check();
    await page.getByLabel('Expires in').selectOption('90d');
    await page.getByRole('button', { name: 'Create key' }).click();
    const tokenBox = page.locator('#new-token');
    await tokenBox.waitFor();
    const token = await tokenBox.inputValue();
    await page.screenshot({ path: screenshotPath('keys-new'), fullPage: true });
    const me = await trackd.http('GET', '/api/v1/orgs/me', { token });
    t.equal(me.status, 200, 'the new key works on /api/v1');
    t.same(me.json.data.scopes, ['assets:read', 'tracking:read']);
    mintedId = me.json.data.api_key_id;
    const row = page.locator(`tr[data-key="${mintedId}"]`);
    await row.getByRole('button', { name: 'Revoke' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.waitFor();
    await page.screenshot({ path: screenshotPath('keys-revoke') });
    await dialog.getByRole('button', { name: 'Revoke key' }).click();
    await row.locator('td', { hasText: 'revoked' }).waitFor();
    const revokedAt = Date.now();
    const refused = await eventually(
      async () => {
        const r = await trackd.http('GET', '/api/v1/orgs/me', { token });
        return r.status === 401 ? r : undefined;
      },
      1000,
      20,
    );
    t.equal(refused.json.error.detail, 'API key has been revoked', `refused ${Date.now() - revokedAt} ms after the revoke`);
    await page.reload();
    await row.waitFor();
    t.equal(
      await row
        .locator('td[data-label="Status"]')
        .textContent()
        .then((s) => s?.startsWith('revoked')),
      true,
      'listed as revoked',
    );
    const lastUsed = await eventually(async () => {
      await page.reload();
      const cell = row.locator('td[data-label="Last used"] time');
      return (await cell.count()) === 1 ? cell.getAttribute('datetime') : undefined;
    }, 5000);
    t.ok(Math.abs(Date.parse(lastUsed!) - Date.now()) < 60_000, `its last use is shown (${lastUsed})`);
  });

  t.test('a CSRF attempt is refused', async (t) => {
    // From the console's own page, a write without the session's CSRF token.
    const status = await page.evaluate(async (id) => {
      const r = await fetch('/console/api/keys/revoke', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ api_key_id: id }),
      });
      return r.status;
    }, writer.api_key_id);
    t.equal(status, 403, 'no CSRF token: 403');
    // From another site (localhost is not 127.0.0.1's site): a page that posts to the console.
    const evil = http.createServer((_req, res) => {
      res.setHeader('Content-Type', 'text/html');
      res.end(`<!doctype html><form id="f" method="POST" enctype="text/plain" action="${base}/console/api/keys/revoke">
        <input name='{"api_key_id":"${writer.api_key_id}","x":"' value='"}'></form>
        <script>fetch(${JSON.stringify(`${base}/console/api/keys/revoke`)}, {method:'POST', mode:'no-cors', credentials:'include',
        headers:{'Content-Type':'text/plain'}, body: JSON.stringify({api_key_id: ${JSON.stringify(writer.api_key_id)}})})
        .finally(() => document.getElementById('f').submit());</script>`);
    });
    await new Promise<void>((resolve) => evil.listen(0, '127.0.0.1', resolve));
    t.teardown(
      () =>
        new Promise<void>((resolve) => {
          evil.close(() => resolve());
          evil.closeAllConnections();
        }),
    );
    const evilPage = await context.newPage();
    const answered = evilPage.waitForResponse(
      (r) => r.url().endsWith('/console/api/keys/revoke') && r.request().resourceType() === 'document',
    );
    await evilPage.goto(`http://localhost:${(evil.address() as AddressInfo).port}/`);
    const answer = await answered;
    t.ok([401, 403, 415].includes(answer.status()), `the cross-site form post is refused (${answer.status()})`);
    await evilPage.close();
    const still = await trackd.http('GET', '/api/v1/orgs/me', { token: writer.token });
    t.equal(still.status, 200, 'the targeted key was not revoked');
  });

  t.test('walk the tree: counts per location and subtree, a location’s assets', async (t) => {
    await page.getByRole('link', { name: 'Locations', exact: true }).click();
    const siteRow = page.locator(`li[data-location="${site.id}"]`);
    await siteRow.waitFor();
    t.equal(await siteRow.locator('[data-count="here"]').textContent(), '1 here', 'Cart 2 is at Site A itself');
    t.equal(await siteRow.locator('[data-count="subtree"]').textContent(), '3 in subtree', 'three assets in Site A and below');
    await page.screenshot({ path: screenshotPath('tree'), fullPage: true });
    // Keyboard: arrow keys move between rows, Enter opens one.
    await siteRow.getByRole('link').focus();
    await page.keyboard.press('ArrowDown');
    t.match((await page.evaluate('document.activeElement?.textContent')) as string, /Yard/, 'ArrowDown moves to the next location');
    await page.keyboard.press('ArrowUp');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: /Site A/ }).waitFor();
    const dockRow = page.locator(`li[data-location="${dock3.id}"]`);
    await dockRow.waitFor();
    t.equal(await dockRow.locator('[data-count="here"]').textContent(), '2 here');
    await dockRow.getByRole('link').click();
    await page.getByRole('heading', { name: /Dock 3/ }).waitFor();
    const rows = page.locator('tr[data-asset]');
    await rows.first().waitFor();
    t.same((await rows.locator('td[data-label="Asset"]').allTextContents()).sort(), ['Forklift 7', 'Pallet 12'], 'the report of Dock 3');
    t.ok(await page.locator('tr[data-asset] time').first().getAttribute('datetime'), 'with last seen');
    await page.screenshot({ path: screenshotPath('location'), fullPage: true });
  });

  t.test('open an asset: tags and its history as a timeline', async (t) => {
    await page.getByRole('link', { name: 'Forklift 7' }).click();
    await page.getByRole('heading', { name: /Forklift 7/ }).waitFor();
    await page.locator('ol.timeline li').nth(1).waitFor();
    t.match(await page.locator('.tags').first().textContent(), 'E28011600000020A1B2C3D4E', 'its tag');
    const visits = await page.locator('ol.timeline li a').allTextContents();
    t.match(visits[0], 'Dock 3', 'newest visit first');
    t.match(visits[1], 'Dock 4');
    t.match(await page.locator('[data-now-at]').textContent(), 'DOCK-3');
    await page.screenshot({ path: screenshotPath('asset'), fullPage: true });
  });

  t.test('search by tag value', async (t) => {
    await page.getByRole('link', { name: 'Search' }).click();
    await page.getByLabel('Search assets').fill('pal0012');
    await page.keyboard.press('Enter');
    const hit = page.locator('ul.results > li');
    await hit.first().waitFor();
    t.equal(await hit.count(), 1);
    t.match(await hit.first().textContent(), 'Pallet 12');
    await page.screenshot({ path: screenshotPath('search'), fullPage: true });
  });

  t.test(
    'live feed: a scan published now moves the asset in the feed and the counts, without a reload, across a network drop',
    async (t) => {
      const nc = await natsClient(t, trackd.natsUrl);
      const moveForklift = (to: string) => publish(nc, `scans.${acme.id}.fixed`, scanBody(to, ['rfid:E28011600000020A1B2C3D4E']));
      await page.getByRole('link', { name: 'Locations', exact: true }).click();
      const siteRow = page.locator(`li[data-location="${site.id}"]`);
      const yardRow = page.locator('li[data-location]', { hasText: 'Yard' });
      await page.locator('[data-feed-status="live"]').waitFor();
      t.equal(await siteRow.locator('[data-count="subtree"]').textContent(), '3 in subtree');
      t.equal(await yardRow.locator('[data-count="here"]').textContent(), '0 here');
      await page.evaluate('window.sameDocument = true');

      await moveForklift('YARD');
      const toYard = page.locator('ol.feed li[data-move]', { hasText: 'FORKLIFT-7' }).filter({ hasText: 'YARD' });
      await toYard.waitFor();
      t.match(await toYard.textContent(), /FORKLIFT-7 DOCK-3 → YARD/, 'the move is listed: asset, from, to');
      await eventually(async () => (await yardRow.locator('[data-count="here"]').textContent()) === '1 here', 5000);
      t.equal(await siteRow.locator('[data-count="subtree"]').textContent(), '2 in subtree', 'Site A lost the forklift');
      t.equal(await siteRow.locator('[data-count="here"]').textContent(), '1 here', 'Cart 2 still at Site A itself');
      t.equal(await yardRow.locator('[data-count="subtree"]').textContent(), '1 in subtree');
      await page.screenshot({ path: screenshotPath('live-feed'), fullPage: true });

      // The network drops; a move happens meanwhile; the feed resumes from its last sequence.
      await context.setOffline(true);
      await page.locator('[data-feed-status="offline"]').waitFor();
      await moveForklift('DOCK-4');
      await context.setOffline(false);
      const toDock4 = page.locator('ol.feed li[data-move]', { hasText: 'YARD → DOCK-4' });
      await toDock4.waitFor({ timeout: 15_000 });
      await page.locator('[data-feed-status="live"]').waitFor();
      await eventually(async () => (await siteRow.locator('[data-count="subtree"]').textContent()) === '3 in subtree', 5000);
      t.equal(await yardRow.locator('[data-count="here"]').textContent(), '0 here', 'the yard is empty again');
      t.equal(await page.locator('ol.feed li[data-move]').count(), 2, 'each move listed once');
      t.equal(await page.evaluate('window.sameDocument'), true, 'no reload');

      // A location's page: its list of assets follows a move out of it.
      await page.evaluate(`location.hash = '#/locations/${dock4.id}'`);
      const forkliftHere = page.locator('tr[data-asset]', { hasText: 'Forklift 7' });
      await forkliftHere.waitFor();
      await page.locator('[data-feed-status="live"]').waitFor();
      await moveForklift('DOCK-3');
      await page.locator('ol.feed li[data-move]', { hasText: 'DOCK-4 → DOCK-3' }).waitFor();
      await forkliftHere.waitFor({ state: 'detached' });
      t.match(await page.getByRole('region', { name: 'Assets here now' }).textContent(), 'No asset is here now', 'Dock 4 emptied in place');
      t.equal(await page.evaluate('window.sameDocument'), true, 'still no reload');
    },
  );

  t.test('an asset’s page follows its moves: where it is now, its history, the feed', async (t) => {
    const nc = await natsClient(t, trackd.natsUrl);
    await page.evaluate(`location.hash = '#/assets/${forklift.id}'`);
    await page.getByRole('heading', { name: /Forklift 7/ }).waitFor();
    await page.locator('[data-feed-status="live"]').waitFor();
    t.match(await page.locator('[data-now-at]').textContent(), 'DOCK-3');
    const visits = await page.locator('ol.timeline li').count();
    await page.evaluate('window.sameDocument = true');
    await publish(nc, `scans.${acme.id}.fixed`, scanBody('YARD', ['rfid:E28011600000020A1B2C3D4E']));
    await page.locator('ol.feed li[data-move]', { hasText: 'DOCK-3 → YARD' }).waitFor();
    await page.locator('[data-now-at]', { hasText: 'YARD' }).waitFor();
    await eventually(async () => (await page.locator('ol.timeline li').count()) === visits + 1, 5000);
    t.match(await page.locator('ol.timeline li a').first().textContent(), 'Yard', 'the new visit heads the timeline');
    t.equal(await page.evaluate('window.sameDocument'), true, 'no reload');
    await page.screenshot({ path: screenshotPath('asset-live'), fullPage: true });
  });

  t.test('phone width: nothing wider than the screen', async (t) => {
    await page.setViewportSize({ width: 390, height: 844 });
    await page.goto(`${base}/console/#/locations/${dock3.id}`);
    await page.locator('tr[data-asset]').first().waitFor();
    t.ok(await page.evaluate('document.documentElement.scrollWidth <= 390'), 'no horizontal scroll at 390 px');
    await page.screenshot({ path: screenshotPath('phone-location'), fullPage: true });
    await page.goto(`${base}/console/#/keys`);
    await page.locator('tr[data-key]').first().waitFor();
    t.ok(await page.evaluate('document.documentElement.scrollWidth <= 390'), 'keys page fits too');
    await page.screenshot({ path: screenshotPath('phone-keys'), fullPage: true });
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  t.test('an expired session sends the person back to sign in', async (t) => {
    // A page without the live feed: the click below, not the feed's next poll, meets the ended session.
    await page.goto(`${base}/console/#/search`);
    await page.getByRole('heading', { name: 'Search assets' }).waitFor();
    const db = new Database(`${trackd.dataDir}/control.sqlite`);
    db.prepare('UPDATE web_sessions SET expires_at = ? WHERE revoked_at IS NULL').run(Date.now() - 1);
    db.close();
    await page.getByRole('link', { name: 'API keys' }).click();
    await page.getByRole('heading', { name: 'Sign in to trackd' }).waitFor();
    t.match(await page.locator('.notice').textContent(), 'session has ended', 'told why');
    await page.screenshot({ path: screenshotPath('session-ended') });
  });

  t.test('no request left this server', async (t) => {
    const foreign = requests.filter((u) => !u.startsWith(base) && !u.startsWith('http://localhost:') && !u.startsWith('data:'));
    t.same(foreign, [], 'every request went to trackd');
    t.same(
      // The live-feed test drops the network on purpose: its failed polls are expected.
      consoleErrors.filter((e) => !/status of 40[0134]|ERR_INTERNET_DISCONNECTED/.test(e)),
      [],
      'no script or CSP errors',
    );
  });
});

t.test('the live feed past the event log’s retention: 410, the view read again, the feed goes on from there', async (t) => {
  const trackd = await startTrackd(t, { env: { HTTP_THREADS: '1', EVENT_RETENTION_SECONDS: '1' } });
  const org = await trackd.createOrg('Short memory');
  createUser(trackd, 'ann@example.com', [org.id]);
  const { token } = await trackd.createKey(org.id, ALL_SCOPES);
  for (const [path, body] of [
    ['/api/v1/locations', { external_key: 'DOCK-1', name: 'Dock 1' }],
    ['/api/v1/locations', { external_key: 'DOCK-2', name: 'Dock 2' }],
    ['/api/v1/assets', { external_key: 'CRATE-1', name: 'Crate 1', tags: [{ tag_type: 'rfid', value: 'C1' }] }],
  ] as const)
    t.equal((await trackd.request('POST', path, { token, body })).status, 201);
  const nc = await natsClient(t, trackd.natsUrl);
  const moveCrate = (to: string) => publish(nc, `scans.${org.id}.fixed`, scanBody(to, ['rfid:C1']));
  const context = await launchChromium(t);
  const page = await context.newPage();
  await page.goto(`${trackd.baseUrl}/console/`);
  await page.getByLabel('Email').fill('ann@example.com');
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Sign in' }).click();
  const dock1 = page.locator('li[data-location]', { hasText: 'Dock 1' });
  const dock2 = page.locator('li[data-location]', { hasText: 'Dock 2' });
  await dock1.waitFor();
  await page.locator('[data-feed-status="live"]').waitFor();
  await page.evaluate('window.sameDocument = true');
  const cursor = Number(await page.locator('[data-as-of-seq]').first().getAttribute('data-as-of-seq'));

  // Offline while two moves happen and leave the log (retention 1 s): the feed's cursor is then expired.
  await context.setOffline(true);
  await page.locator('[data-feed-status="offline"]').waitFor();
  await moveCrate('DOCK-1');
  await moveCrate('DOCK-2');
  await drained(nc);
  await eventually(async () => (await trackd.request('GET', `/api/v1/events?after=${cursor}`, { token })).status === 410, 15_000);
  await context.setOffline(false);
  await page.locator('[data-feed-resumed="expired"]').waitFor({ timeout: 20_000 });
  t.match(await page.locator('.feed-status').textContent(), `moves after #${cursor} were no longer in the event log`, 'it says why');
  t.equal(await dock2.locator('[data-count="here"]').textContent(), '1 here', 'the counts read again hold the moves the feed missed');
  t.equal(await dock1.locator('[data-count="here"]').textContent(), '0 here');
  await page.screenshot({ path: screenshotPath('live-feed-expired'), fullPage: true });

  // And the feed goes on from the view's new as_of_seq: the next move is applied once.
  await moveCrate('DOCK-1');
  await page.locator('ol.feed li[data-move]', { hasText: 'DOCK-2 → DOCK-1' }).waitFor();
  await eventually(async () => (await dock1.locator('[data-count="here"]').textContent()) === '1 here', 5000);
  t.equal(await dock2.locator('[data-count="here"]').textContent(), '0 here');
  t.equal(await page.evaluate('window.sameDocument'), true, 'read again in place, no page reload');
});
