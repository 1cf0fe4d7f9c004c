#!/usr/bin/env node
// Browser test of the playground page (GET /): starts the real daemon on the
// demo weights, drives Debian's Chromium through playwright-core, and checks
// the page against the daemon's own POST /attend answers.
//   node tests/ui/playground.test.js          (make test-ui does this)
// Env: ATTN_SERVER_BIN (default bin/attention-server), CHROMIUM (default
// /usr/bin/chromium), ATTN_UI_UPDATE_DOCS=1 to refresh docs/playground.png.
// Last line: "N passed, N failed"; exit status 1 on any failure.
'use strict';
const { chromium } = require('playwright-core');
const { spawn } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const net = require('net');

const ROOT = path.resolve(__dirname, '..', '..');
const BIN = path.resolve(ROOT, process.env.ATTN_SERVER_BIN || 'bin/attention-server');
const WEIGHTS = path.join(ROOT, 'config', 'weights', 'demo.safetensors');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const OUT = path.join(ROOT, 'tests', 'out');
const SHOT = path.join(OUT, 'playground.png');
const DOCS_SHOT = path.join(ROOT, 'docs', 'playground.png');
const API_KEY = 'ui-test-key-7f3a';

let passed = 0, failed = 0;
const daemons = [];
let context = null, userDir = null;

function assert(cond, msg) { if (!cond) throw new Error(msg); }
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function check(name, fn) {
  const t0 = Date.now();
  try {
    await fn();
    passed++;
    console.log(`ok   ${name} (${Date.now() - t0} ms)`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${(e && e.message ? e.message : String(e)).split('\n')[0]}`);
  }
}

// ------------------------------------------------------------ the daemon
function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => resolve(p)); });
  });
}
async function startDaemon(extraEnv = {}) {
  assert(fs.existsSync(BIN), `${BIN} is missing: run make bin/attention-server`);
  const port = await freePort();
  const env = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('ATTN_')) env[k] = v;
  Object.assign(env, extraEnv);
  const child = spawn(BIN, ['--host', '127.0.0.1', '--port', String(port), '--model', `demo=${WEIGHTS}`],
    { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const d = { child, base: `http://127.0.0.1:${port}`, log: '' };
  const keep = (b) => { d.log = (d.log + b).slice(-8000); };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  daemons.push(d);
  for (const deadline = Date.now() + 20000; Date.now() < deadline; await sleep(100)) {
    if (child.exitCode !== null) throw new Error(`daemon exited with ${child.exitCode}: ${d.log.slice(-400)}`);
    try { if ((await fetch(d.base + '/readyz')).status === 200) return d; } catch (e) { /* not yet */ }
  }
  throw new Error('daemon not ready within 20 s: ' + d.log.slice(-400));
}
async function stopDaemon(d) {
  if (d.child.exitCode !== null || d.child.signalCode) return;
  const gone = new Promise((r) => d.child.once('exit', r));
  d.child.kill('SIGTERM');
  if (await Promise.race([gone.then(() => true), sleep(5000)]) !== true) d.child.kill('SIGKILL');
}
async function attend(d, body, key) {
  const headers = { 'Content-Type': 'application/json' };
  if (key) headers.Authorization = 'Bearer ' + key;
  const r = await fetch(d.base + '/attend', { method: 'POST', headers, body: JSON.stringify(body) });
  if (r.status !== 200) throw new Error(`test's own POST /attend: HTTP ${r.status} ${await r.text()}`);
  return r.json();
}

// ---------------------------------------------------------- page helpers
const q = (id) => `[data-testid="${id}"]`;
const heat = (h) => `[data-testid="heatmap"][data-head="${h}"]`;

async function runPage(page) {
  const [res] = await Promise.all([
    page.waitForResponse((r) => r.url().endsWith('/attend'), { timeout: 15000 }),
    page.click(q('run')),
  ]);
  await page.waitForFunction((sel) => !document.querySelector(sel).disabled, q('run'), { timeout: 15000 });
  return res;
}
async function pageRows(page) { return JSON.parse(await page.inputValue(q('embeddings'))); }
async function tooltip(page) {
  const t = page.locator(q('tooltip'));
  await t.waitFor({ state: 'visible', timeout: 3000 });
  return { text: await t.innerText(), value: await page.locator(q('tooltip-value')).innerText() };
}
async function hoverCell(page, head, i, j) {
  const cv = page.locator(heat(head));
  await cv.scrollIntoViewIfNeeded();
  const box = await cv.boundingBox();
  const g = await cv.evaluate((c) => ({ x: +c.dataset.gridX, y: +c.dataset.gridY, cell: +c.dataset.cell, w: +c.dataset.cssWidth }));
  const k = box.width / g.w;
  await page.mouse.move(box.x + (g.x + (j + 0.5) * g.cell) * k, box.y + (g.y + (i + 0.5) * g.cell) * k);
  return tooltip(page);
}
// Pixels of every heatmap: how many differ from the corner (background),
// and how many distinct colours the grid area holds.
function canvasStats(page) {
  return page.$$eval('[data-testid="heatmap"]', (cs) => cs.map((c) => {
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let drawn = 0;
    for (let k = 0; k < d.length; k += 4) {
      if (d[k] !== d[0] || d[k + 1] !== d[1] || d[k + 2] !== d[2] || d[k + 3] !== d[3]) drawn++;
    }
    const s = c.width / +c.dataset.cssWidth, cell = +c.dataset.cell * s;
    const colours = new Set();
    const n = Math.round((c.height / s - +c.dataset.gridY - 4) / +c.dataset.cell);
    for (let i = 0; i < n; i++) {
      for (let j = 0; j < n; j++) {
        const x = Math.floor(+c.dataset.gridX * s + (j + 0.5) * cell), y = Math.floor(+c.dataset.gridY * s + (i + 0.5) * cell);
        const p = 4 * (y * c.width + x);
        colours.add(`${d[p]},${d[p + 1]},${d[p + 2]},${d[p + 3]}`);
      }
    }
    return { head: c.dataset.head, drawn, total: d.length / 4, colours: colours.size, label: c.getAttribute('aria-label'), tab: c.tabIndex };
  }));
}
const valueOf = (text) => { const m = /: (\S+)$/.exec(text.trim()); return m ? Number(m[1]) : NaN; };

// ------------------------------------------------------------------ main
async function main() {
  fs.mkdirSync(OUT, { recursive: true });
  let d = null;
  await check('daemon starts with the demo weights', async () => { d = await startDaemon(); });
  if (!d) return;

  await check('GET /, /app.js, /style.css are served with the CSP', async () => {
    const r = await fetch(d.base + '/');
    assert(r.status === 200, `GET / gave ${r.status}`);
    assert(/text\/html/.test(r.headers.get('content-type') || ''), `GET / content-type ${r.headers.get('content-type')}`);
    const csp = r.headers.get('content-security-policy') || '';
    assert(csp.includes("default-src 'none'") && csp.includes("script-src 'self'"), `CSP header: "${csp}"`);
    const html = await r.text();
    assert(!/<script(?![^>]*\bsrc=)[^>]*>/i.test(html), 'index.html has an inline script');
    assert(!/\sstyle=|<style/i.test(html), 'index.html has inline style');
    for (const [f, type] of [['app.js', /javascript/], ['style.css', /text\/css/]]) {
      const a = await fetch(`${d.base}/${f}`);
      assert(a.status === 200, `GET /${f} gave ${a.status}`);
      assert(type.test(a.headers.get('content-type') || ''), `GET /${f} content-type ${a.headers.get('content-type')}`);
    }
  });

  const models = (await (await fetch(d.base + '/v1/models')).json()).models;
  const demo = models.find((m) => m.name === 'demo') || { embed_dim: 64, num_heads: 4 };
  const H = demo.num_heads, E = demo.embed_dim;

  userDir = fs.mkdtempSync(path.join(os.tmpdir(), 'attn-ui-'));
  context = await chromium.launchPersistentContext(userDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: { width: 1280, height: 900 },
    deviceScaleFactor: 1,
    timeout: 30000,
  });
  context.setDefaultTimeout(10000);
  const problems = [], external = [];
  context.on('request', (r) => {
    const u = r.url();
    if (!u.startsWith('http://127.0.0.1:') && !u.startsWith('data:')) external.push(u);
  });
  await context.addInitScript(() => {
    window.__csp = [];
    document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`));
  });
  const watch = (page) => {
    page.on('pageerror', (e) => problems.push('page error: ' + e.message));
    page.on('console', (m) => {
      if (m.type() === 'error' && !/Failed to load resource/.test(m.text())) problems.push('console: ' + m.text());
    });
  };
  const page = context.pages()[0] || await context.newPage();
  watch(page);

  await check('weight sets listed with their dimensions', async () => {
    await page.goto(d.base + '/');
    await page.waitForFunction((sel) => [...document.querySelector(sel).options].some((o) => o.value === 'demo'), q('model'));
    const text = await page.locator(`${q('model')} option[value="demo"]`).innerText();
    assert(text.includes(String(E)) && text.includes(`${H} heads`), `option text "${text}"`);
  });

  await check('example: five tokens of the model width', async () => {
    await page.fill(q('embeddings'), '');
    await page.click(q('example'));
    const rows = await pageRows(page);
    assert(rows.length === 5 && rows.every((r) => r.length === E), `shape ${rows.length} x ${rows[0] && rows[0].length}`);
    const labels = await page.inputValue(q('labels'));
    assert(labels === 'Attention is all you need', `labels "${labels}"`);
    await page.click(q('example'));
    assert(JSON.stringify(await pageRows(page)) === JSON.stringify(rows), 'example is not deterministic');
  });

  let ref = null;
  await check(`run draws ${H} head heatmaps and the mean`, async () => {
    const res = await runPage(page);
    assert(res.status() === 200, `POST /attend from the page: HTTP ${res.status()}`);
    const stats = await canvasStats(page);
    const heads = stats.filter((s) => s.head !== 'avg');
    assert(heads.length === H, `${heads.length} head canvases, want ${H}`);
    assert(stats.some((s) => s.head === 'avg'), 'no data-head="avg" canvas');
    for (const s of stats) {
      assert(s.drawn > s.total / 4, `head ${s.head}: only ${s.drawn} of ${s.total} pixels drawn`);
      assert(s.colours >= 3, `head ${s.head}: grid holds ${s.colours} colours`);
      assert(s.tab === 0 && s.label && s.label.length > 10, `head ${s.head}: tabindex ${s.tab}, aria-label "${s.label}"`);
    }
    ref = await attend(d, { model: 'demo', embeddings: await pageRows(page), causal: false, average_heads: false, encoding_format: 'float', need_weights: true });
  });

  await check('hover tooltip shows the exact weight POST /attend returns', async () => {
    assert(ref, 'no reference response');
    const t = await hoverCell(page, 1, 2, 3);
    assert(t.text.includes('query 2 (all) -> key 3 (you): '), `tooltip "${t.text}"`);
    const want = ref.attention_weights[1][2][3];
    assert(Number(t.value) === want && valueOf(t.text) === want, `tooltip ${t.value}, /attend says ${want}`);
    await page.screenshot({ path: SHOT, fullPage: true });
  });

  await check('keyboard: focused heatmap, arrow keys move the cell', async () => {
    assert(ref, 'no reference response');
    await page.mouse.move(1, 1);
    await page.locator(heat(0)).focus();
    let t = await tooltip(page);
    assert(t.text.includes('query 0 (Attention) -> key 0 (Attention)'), `on focus: "${t.text}"`);
    for (const k of ['ArrowDown', 'ArrowRight', 'ArrowRight']) await page.keyboard.press(k);
    t = await tooltip(page);
    const want = ref.attention_weights[0][1][2];
    assert(t.text.includes('query 1 (is) -> key 2 (all)') && Number(t.value) === want, `"${t.text}", want ${want}`);
    await page.keyboard.press('Escape');
    await page.locator(q('tooltip')).waitFor({ state: 'hidden', timeout: 2000 });
  });

  await check('Server-Timing figures and output vectors shown', async () => {
    const timing = await page.innerText(q('timing'));
    for (const name of ['queue', 'compute', 'encode']) assert(new RegExp(`${name} [0-9.]+ ms`).test(timing), `timing "${timing}"`);
    const out = (await page.innerText(q('output'))).split('\n');
    assert(out.length === 6, `output has ${out.length} lines, want header + 5`);
    const first = Number(out[1].trim().split(/\s+/)[2]);
    assert(Math.abs(first - ref.output[0][0]) < 1e-4, `output[0][0] shown ${first}, /attend ${ref.output[0][0]}`);
  });

  await check('base64 + causal: float32 decoded in the page matches', async () => {
    await page.selectOption(q('encoding'), 'base64');
    await page.check(q('causal'));
    const res = await runPage(page);
    assert(res.status() === 200, `HTTP ${res.status()}`);
    const body = res.request().postDataJSON();
    assert(body.embeddings && body.embeddings.dtype === 'float32' && body.causal === true, 'request was not base64/causal');
    const want = await attend(d, { model: 'demo', embeddings: await pageRows(page), causal: true, encoding_format: 'float' });
    let t = await hoverCell(page, 2, 3, 1);
    const w = want.attention_weights[2][3][1];
    assert(Math.fround(Number(t.value)) === Math.fround(w), `tooltip ${t.value}, /attend ${w}`);
    t = await hoverCell(page, 2, 1, 3);
    assert(Number(t.value) === 0, `masked cell (1,3) shows ${t.value}`);
    await page.selectOption(q('encoding'), 'float');
    await page.uncheck(q('causal'));
  });

  await check('average heads: one map from the server', async () => {
    await page.check(q('average'));
    await runPage(page);
    const stats = await canvasStats(page);
    assert(stats.length === 1 && stats[0].head === 'avg', `canvases: ${stats.map((s) => s.head)}`);
    const want = await attend(d, { model: 'demo', embeddings: await pageRows(page), average_heads: true });
    const t = await hoverCell(page, 'avg', 4, 0);
    assert(Number(t.value) === want.attention_weights[4][0], `tooltip ${t.value}, /attend ${want.attention_weights[4][0]}`);
    await page.uncheck(q('average'));
  });

  await check('error: wrong embedding width names "embeddings"', async () => {
    await page.fill(q('embeddings'), '[[1, 2, 3], [4, 5, 6]]');
    const res = await runPage(page);
    assert(res.status() === 400, `HTTP ${res.status()}`);
    const err = page.locator(q('error'));
    await err.waitFor({ state: 'visible' });
    const text = await err.innerText();
    assert(/embeddings/.test(text) && /invalid_request/.test(text), `error area: "${text}"`);
    assert(await page.getAttribute(q('embeddings'), 'aria-invalid') === 'true', 'embeddings field not marked');
    assert(await page.getAttribute(q('model'), 'aria-invalid') === null, 'model select marked too');
  });

  await check('phone width: no horizontal scroll, heatmaps wrap', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await page.click(q('example'));
    await runPage(page);
    const m = await page.evaluate(() => ({
      sw: document.documentElement.scrollWidth,
      tops: [...document.querySelectorAll('.hm')].map((f) => Math.round(f.getBoundingClientRect().top)),
      right: Math.max(...[...document.querySelectorAll('canvas')].map((c) => c.getBoundingClientRect().right)),
    }));
    assert(m.sw <= 390, `page is ${m.sw} px wide`);
    assert(m.right <= 390, `a canvas reaches ${m.right} px`);
    assert(new Set(m.tops).size > 1, `heatmaps do not wrap: tops ${m.tops}`);
    assert((await canvasStats(page)).every((s) => s.drawn > s.total / 4), 'a heatmap is blank');
    await page.screenshot({ path: path.join(OUT, 'playground-phone.png'), fullPage: true });
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  await check('128 tokens (the largest dense map): drawn on canvases, labels thinned', async () => {
    await page.fill(q('random-n'), '128');
    await page.click(q('random'));
    const res = await runPage(page);
    assert(res.status() === 200, `HTTP ${res.status()}`);
    assert(res.request().postDataJSON().weights_topk === undefined, 'asked for top-k at 128 tokens');
    const nodes = await page.evaluate(() => document.querySelectorAll('#heatmaps *').length);
    assert(nodes < 40, `${nodes} elements inside the heatmap area`);
    const s = await canvasStats(page);
    assert(s.length === H + 1, `${s.length} heatmaps`);
    for (const x of s) assert(x.drawn > x.total / 4, `head ${x.head}: ${x.drawn} of ${x.total} pixels drawn`);
    assert(/every \d+th token/.test(s[0].label), `aria-label "${s[0].label}"`);
    assert(await page.locator(q('row-pick')).isHidden(), 'the row picker shows for a dense map');
    const t = await hoverCell(page, 0, 100, 7);
    assert(t.text.includes('query 100 (t100) -> key 7 (t7)'), `tooltip "${t.text}"`);
  });

  await check('2,048 tokens: sparse top-k maps, keyboard on a row, the whole row on Enter', async () => {
    const t0 = Date.now();
    await page.fill(q('random-n'), '2048');
    await page.click(q('random'));
    const res = await runPage(page);
    assert(res.status() === 200, `HTTP ${res.status()}`);
    const sent = res.request().postDataJSON();
    assert(sent.weights_topk === 8 && sent.need_weights !== false, `request asked weights_topk ${sent.weights_topk}`);
    const answer = await res.json();
    assert(answer.attention_topk && !answer.attention_weights, 'the answer is not top-k');
    const s = await canvasStats(page);
    assert(s.length === H && s.every((x) => x.head !== 'avg'), `canvases: ${s.map((x) => x.head)}`);
    for (const x of s) {
      assert(x.drawn > 2048 && x.colours >= 3, `head ${x.head}: ${x.drawn} pixels drawn, ${x.colours} colours`);
      assert(/top 8 attention weights of each of 2048 query rows/.test(x.label), `aria-label "${x.label}"`);
    }
    // the page's own answer holds what its tooltip shows: head 1, row 5, second-largest key
    const want = await attend(d, { model: 'demo', embeddings: await pageRows(page), weights_topk: 8 });
    assert(JSON.stringify(want.attention_topk.indices[1][5]) === JSON.stringify(answer.attention_topk.indices[1][5]), 'the page asked something else');
    await page.mouse.move(1, 1);
    await page.locator(heat(1)).focus();
    let t = await tooltip(page);
    const j0 = want.attention_topk.indices[1][0][0];
    assert(t.text.includes(`query 0 (t0) -> key ${j0} (t${j0})`) && /top 1 of 8/.test(t.text), `on focus: "${t.text}"`);
    for (let i = 0; i < 5; i++) await page.keyboard.press('ArrowDown');
    await page.keyboard.press('ArrowRight');
    t = await tooltip(page);
    const j = want.attention_topk.indices[1][5][1], v = want.attention_topk.values[1][5][1];
    assert(t.text.includes(`query 5 (t5) -> key ${j} (t${j})`) && Number(t.value) === v, `"${t.text}", want key ${j} ${v}`);
    // Enter: the whole of row 5, a strip per head, the same numbers as weights_rows
    const [rowRes] = await Promise.all([
      page.waitForResponse((r) => r.url().endsWith('/attend') && (r.request().postDataJSON() || {}).weights_rows !== undefined),
      page.keyboard.press('Enter'),
    ]);
    assert(rowRes.status() === 200, `weights_rows: HTTP ${rowRes.status()}`);
    assert(JSON.stringify(rowRes.request().postDataJSON().weights_rows) === '[5]', 'not row 5');
    await page.locator(q('row-view')).waitFor({ state: 'visible' });
    const row = (await attend(d, { model: 'demo', embeddings: await pageRows(page), weights_rows: [5] })).attention_weights;
    for (let h = 0; h < H; h++) {
      const tk = want.attention_topk;
      for (let k = 0; k < 8; k++) {
        const got = row[h][0][tk.indices[h][5][k]];
        assert(Math.abs(got - tk.values[h][5][k]) <= 1e-6, `head ${h} top ${k}: row says ${got}, top-k ${tk.values[h][5][k]}`);
      }
    }
    await page.locator(q('row-canvas')).focus();
    t = await tooltip(page);
    assert(t.text.includes('query 5 (t5) -> key 0 (t0)') && Number(t.value) === row[0][0][0], `row view: "${t.text}", want ${row[0][0][0]}`);
    await page.keyboard.press('End');
    await page.keyboard.press('ArrowDown');
    t = await tooltip(page);
    assert(t.text.includes('key 2047 (t2047)') && /head 1/.test(t.text) && Number(t.value) === row[1][0][2047], `row view end: "${t.text}"`);
    // the row field asks for another row
    await page.fill(q('row-pick'), '2047');
    const [r2] = await Promise.all([
      page.waitForResponse((r) => r.url().endsWith('/attend') && (r.request().postDataJSON() || {}).weights_rows !== undefined),
      page.click(q('row-show')),
    ]);
    assert(JSON.stringify(r2.request().postDataJSON().weights_rows) === '[2047]', 'the row field did not ask for row 2047');
    await page.screenshot({ path: path.join(OUT, 'playground-sparse.png'), fullPage: true });
    assert(Date.now() - t0 < 60000, `2,048 tokens took ${Date.now() - t0} ms in the page`);
  });

  await check('2,048 tokens, average heads: one sparse map of the average from the server', async () => {
    await page.check(q('average'));
    const res = await runPage(page);
    assert(res.status() === 200 && res.request().postDataJSON().average_heads === true, `HTTP ${res.status()}`);
    const s = await canvasStats(page);
    assert(s.length === 1 && s[0].head === 'avg', `canvases: ${s.map((x) => x.head)}`);
    const want = await attend(d, { model: 'demo', embeddings: await pageRows(page), weights_topk: 8, average_heads: true });
    await page.locator(heat('avg')).focus();
    const t = await tooltip(page);
    assert(Number(t.value) === want.attention_topk.values[0][0], `tooltip ${t.value}, /attend ${want.attention_topk.values[0][0]}`);
    await page.uncheck(q('average'));
    await page.fill(q('random-n'), '8');
  });

  await check('API key: 401 asks for the key, then the page works', async () => {
    const dk = await startDaemon({ ATTN_API_KEY: API_KEY });
    const p2 = await context.newPage();
    watch(p2);
    try {
      await p2.goto(dk.base + '/');
      const err = p2.locator(q('error'));
      await err.waitFor({ state: 'visible' });
      const text = await err.innerText();
      assert(/unauthorized/.test(text) && /API key/.test(text), `error area: "${text}"`);
      assert(await p2.getAttribute(q('apikey'), 'aria-invalid') === 'true', 'API key field not marked');
      assert(await p2.getAttribute(q('apikey'), 'type') === 'password', 'API key field is not a password field');
      await p2.fill(q('apikey'), API_KEY);
      await p2.press(q('apikey'), 'Tab');
      await p2.waitForFunction((sel) => [...document.querySelector(sel).options].some((o) => o.value === 'demo'), q('model'));
      await p2.click(q('example'));
      const res = await runPage(p2);
      assert(res.status() === 200, `POST /attend with the key: HTTP ${res.status()}`);
      assert(res.request().headers().authorization === 'Bearer ' + API_KEY, 'no Authorization header');
      assert(await p2.evaluate(() => localStorage.length + sessionStorage.length) === 0, 'something was stored');
    } finally {
      await p2.close();
      await stopDaemon(dk);
    }
  });

  await check('no CSP violations, script errors or outside requests', async () => {
    const csp = await page.evaluate(() => window.__csp);
    assert(csp.length === 0, 'CSP: ' + csp.join('; '));
    assert(problems.length === 0, problems.join('; '));
    assert(external.length === 0, 'requested ' + external.join(', '));
  });

  if (fs.existsSync(SHOT) && (process.env.ATTN_UI_UPDATE_DOCS === '1' || !fs.existsSync(DOCS_SHOT))) {
    fs.mkdirSync(path.dirname(DOCS_SHOT), { recursive: true });
    fs.copyFileSync(SHOT, DOCS_SHOT);
  }
  if (failed) console.log('daemon log (tail):\n' + d.log.slice(-1500));
}

async function cleanup() {
  if (context) await context.close().catch(() => {});
  for (const d of daemons) await stopDaemon(d).catch(() => {});
  if (userDir) fs.rmSync(userDir, { recursive: true, force: true });
}

const watchdog = setTimeout(async () => {
  console.log('FAIL the whole test took over 180 s');
  failed++;
  await cleanup();
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(1);
}, 180000);

main()
  .catch((e) => { failed++; console.log('FAIL ' + (e && e.stack ? e.stack.split('\n')[0] : e)); })
  .finally(async () => {
    await cleanup();
    clearTimeout(watchdog);
    console.log(`${passed} passed, ${failed} failed`);
    process.exit(failed ? 1 : 0);
  });
