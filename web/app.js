// attention-server playground: plain ES2020, no dependencies, CSP-clean
// (no inline code or style attributes; element.style is set through CSSOM).
'use strict';
(() => {
  const $ = (id) => document.getElementById(id);
  const el = {
    form: $('form'), model: $('model'), modelInfo: $('model-info'), key: $('apikey'),
    example: $('example'), randN: $('rand-n'), seed: $('seed'), random: $('random'), file: $('file'),
    emb: $('embeddings'), embInfo: $('emb-info'), labels: $('labels'),
    causal: $('causal'), average: $('average'), encoding: $('encoding'),
    run: $('run'), status: $('status'), error: $('error'),
    timing: $('timing'), scale: $('scale'), legend: $('legend'), legLo: $('leg-lo'), legHi: $('leg-hi'),
    maps: $('heatmaps'), out: $('output'), outInfo: $('out-info'), outToggle: $('out-toggle'), tip: $('tip'),
    rowBar: $('row-bar'), rowPick: $('row-pick'), rowShow: $('row-show'), rowInfo: $('row-info'),
    rowView: $('row-view'), rowCanvas: $('row-canvas'), axesDense: $('axes-dense'), axesSparse: $('axes-sparse'),
  };
  const EXAMPLE = ['Attention', 'is', 'all', 'you', 'need'];
  const FONT = '11px system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif';
  const INK = '#1c2430', MUTED = '#5b6676', MARK = '#f08c00';
  const st = { models: [], result: null, maps: [], generated: null, outAll: false, vmax: 1, lastWidth: 0, row: null };
  // Above this many tokens a dense map stops being readable: its grid is at
  // most 512 px, so past 128 tokens a cell is under 4 px (too small to aim
  // at or to tell from its neighbours), and the dense answer grows as n^2
  // (2,048 tokens, 4 heads: 16.8M weights, some 190 MB of JSON). Longer
  // inputs ask the server for each row's top-k weights instead (a sparse
  // map), and for one whole row at a time (weights_rows).
  const SPARSE_ABOVE = 128;
  const TOPK = 8;

  // ------------------------------------------------------------ generation
  // mulberry32: a small 32-bit seeded PRNG returning floats in [0, 1).
  function mulberry32(seed) {
    let a = seed >>> 0;
    return () => {
      a = (a + 0x6d2b79f5) >>> 0;
      let t = Math.imul(a ^ (a >>> 15), a | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }
  function fnv1a(s) {
    let h = 0x811c9dc5;
    for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193) >>> 0;
    return h;
  }
  function gaussRow(rng, e) { // standard normal values (Box-Muller), 4 decimals
    const row = new Array(e);
    for (let k = 0; k < e; k += 2) {
      const r = Math.sqrt(-2 * Math.log(1 - rng())), a = 2 * Math.PI * rng();
      row[k] = +(r * Math.cos(a)).toFixed(4);
      if (k + 1 < e) row[k + 1] = +(r * Math.sin(a)).toFixed(4);
    }
    return row;
  }
  const fmtRows = (rows) => '[\n' + rows.map((r) => '  [' + r.join(', ') + ']').join(',\n') + '\n]';
  const width = () => (curModel() || {}).embed_dim || 64;

  function generate(kind) {
    const e = width();
    let rows;
    if (kind === 'example') {
      rows = EXAMPLE.map((w) => gaussRow(mulberry32(fnv1a(w.toLowerCase())), e));
      el.labels.value = EXAMPLE.join(' ');
    } else {
      const n = Math.max(1, Math.min(8192, Math.floor(+el.randN.value) || 8));
      el.randN.value = n;
      const rng = mulberry32(Math.floor(+el.seed.value) || 0);
      rows = Array.from({ length: n }, () => gaussRow(rng, e));
      el.labels.value = '';
    }
    el.emb.value = fmtRows(rows);
    st.generated = { kind, text: el.emb.value };
    clearError();
    embInfo();
  }

  // --------------------------------------------------------------- tensors
  function b64encode(u8) {
    let s = '';
    for (let i = 0; i < u8.length; i += 0x8000) s += String.fromCharCode.apply(null, u8.subarray(i, i + 0x8000));
    return btoa(s);
  }
  function toB64(rows) {
    const n = rows.length, e = rows[0].length, dv = new DataView(new ArrayBuffer(n * e * 4));
    let o = 0;
    rows.forEach((r, i) => {
      if (r.length !== e) throw inputErr(`embeddings: row ${i} has ${r.length} numbers but row 0 has ${e}`);
      for (const x of r) {
        if (typeof x !== 'number') throw inputErr(`embeddings: row ${i} holds a non-number`);
        dv.setFloat32(o, x, true); o += 4;
      }
    });
    return { dtype: 'float32', shape: [n, e], base64: b64encode(new Uint8Array(dv.buffer)) };
  }
  // -> {shape, data (flat), f32: values are exact float32}
  function tensor(x) {
    if (x && typeof x === 'object' && !Array.isArray(x)) {
      const ints = x.dtype === 'int32';
      if ((!ints && x.dtype !== 'float32') || typeof x.base64 !== 'string') throw new Error('unexpected tensor object in the response');
      const bin = atob(x.base64), dv = new DataView(new ArrayBuffer(bin.length));
      for (let i = 0; i < bin.length; i++) dv.setUint8(i, bin.charCodeAt(i));
      const data = ints ? new Int32Array(bin.length >> 2) : new Float32Array(bin.length >> 2);
      for (let i = 0; i < data.length; i++) data[i] = ints ? dv.getInt32(4 * i, true) : dv.getFloat32(4 * i, true);
      if (x.shape.reduce((a, b) => a * b, 1) !== data.length) throw new Error('tensor shape does not match its bytes');
      return { shape: x.shape, data, f32: true };
    }
    const shape = [];
    for (let t = x; Array.isArray(t); t = t[0]) shape.push(t.length);
    const data = new Float64Array(shape.reduce((a, b) => a * b, 1));
    let k = 0;
    const walk = (a, d) => { if (d === shape.length - 1) for (const v of a) data[k++] = v; else for (const s of a) walk(s, d + 1); };
    if (shape.length) walk(x, 0);
    return { shape, data, f32: false };
  }
  // Full precision: JSON numbers as parsed; float32 values as the shortest
  // text that reads back to the same float32.
  function full(v, f32) {
    if (f32 && Number.isFinite(v)) {
      for (let p = 1; p <= 9; p++) { const x = +v.toPrecision(p); if (Math.fround(x) === v) return String(x); }
    }
    return String(v);
  }

  // ----------------------------------------------------------------- input
  function inputErr(message) { return { message, type: 'input', field: el.emb }; }
  function parseEmb() {
    const text = el.emb.value.trim();
    if (!text) throw inputErr('embeddings: paste a JSON array of shape [n, E], or generate one');
    let v;
    try { v = JSON.parse(text); } catch (e) { throw inputErr('embeddings: not valid JSON (' + e.message + ')'); }
    if (v && !Array.isArray(v) && Array.isArray(v.embeddings)) v = v.embeddings;
    if (Array.isArray(v) && v.length === 1 && Array.isArray(v[0]) && Array.isArray(v[0][0])) v = v[0];
    if (!Array.isArray(v) || !v.length || !v.every(Array.isArray)) throw inputErr('embeddings: expected an array of rows, shape [n, E]');
    return v;
  }
  function embInfo() {
    try {
      const v = parseEmb();
      el.embInfo.textContent = `${v.length} token${v.length === 1 ? '' : 's'} × ${v[0].length}`;
    } catch (e) { el.embInfo.textContent = el.emb.value.trim() ? 'not a [n, E] JSON array yet' : ''; }
  }
  function labels(n) {
    const t = el.labels.value.trim();
    const parts = t ? (t.includes(',') ? t.split(',') : t.split(/\s+/)).map((s) => s.trim()) : [];
    return Array.from({ length: n }, (_, i) => parts[i] || `t${i}`);
  }
  async function loadFile() {
    const f = el.file.files[0];
    if (!f) return;
    clearError();
    try {
      const v = JSON.parse(await f.text());
      const rows = Array.isArray(v) ? v : v && v.embeddings;
      if (!Array.isArray(rows)) throw new Error('expected a [n, E] array or an object with "embeddings"');
      const tok = v.labels || v.tokens;
      el.labels.value = Array.isArray(tok) ? tok.join(', ') : '';
      if (v.model && st.models.some((m) => m.name === v.model)) { el.model.value = v.model; modelInfo(); }
      el.emb.value = rows.every((r) => Array.isArray(r) && r.every((x) => typeof x === 'number')) ? fmtRows(rows) : JSON.stringify(rows);
      st.generated = null;
      embInfo();
      setStatus(`loaded ${f.name}`);
    } catch (e) {
      showError({ message: `embeddings: could not read ${f.name}: ${e.message}`, type: 'input', field: el.emb });
    }
  }

  // ---------------------------------------------------------------- server
  function headers(json) {
    const h = { Accept: 'application/json' };
    if (json) h['Content-Type'] = 'application/json';
    if (el.key.value) h.Authorization = 'Bearer ' + el.key.value;
    return h;
  }
  async function readError(res) {
    let body = null;
    try { body = await res.json(); } catch (e) { /* not JSON */ }
    const err = {
      status: res.status,
      type: (body && body.error_type) || 'http_' + res.status,
      message: (body && body.error) || res.statusText || 'request failed',
    };
    if (res.status === 401) {
      err.field = el.key;
      err.hint = el.key.value ? 'The API key was not accepted: check it in the API key field.'
        : 'This server requires an API key: enter it in the API key field.';
    }
    return err;
  }
  const curModel = () => st.models.find((m) => m.name === el.model.value);

  async function loadModels() {
    el.model.replaceChildren(new Option('loading…', ''));
    let res;
    try { res = await fetch('/v1/models', { headers: headers(false) }); } catch (e) {
      el.model.replaceChildren(new Option('(server unreachable)', ''));
      return showError({ message: 'could not reach the server: ' + e.message, type: 'network' });
    }
    if (!res.ok) {
      el.model.replaceChildren(new Option('(could not list weight sets)', ''));
      return showError(await readError(res));
    }
    st.models = (await res.json()).models || [];
    el.model.replaceChildren(...st.models.map((m) =>
      new Option(`${m.name} — E ${m.embed_dim}, ${m.num_heads} heads × ${m.head_dim}`, m.name)));
    if (!st.models.length) el.model.append(new Option('(no weight sets loaded)', ''));
    if (el.error.dataset.field === 'apikey') clearError();
    modelInfo();
    if (!el.emb.value.trim()) generate('example');
  }
  function modelInfo() {
    const m = curModel();
    el.modelInfo.textContent = m ? [
      `E = ${m.embed_dim}`, `${m.num_heads} heads of ${m.head_dim}`, `kdim ${m.kdim}`, `vdim ${m.vdim}`,
      m.bias ? 'bias' : 'no bias', m.dtype, m.parameters != null ? `${Number(m.parameters).toLocaleString('en-US')} parameters` : '',
    ].filter(Boolean).join(' · ') : '';
    // Generated inputs follow the selected model's width.
    if (st.generated && st.generated.text === el.emb.value && m) {
      try { if (parseEmb()[0].length !== m.embed_dim) generate(st.generated.kind); } catch (e) { /* leave it */ }
    }
  }

  function timingText(h, rtt) {
    const parts = [];
    for (const item of (h || '').split(',')) {
      const [name, ...params] = item.trim().split(';');
      if (!name) continue;
      const dur = params.map((p) => p.trim().match(/^dur=([0-9.eE+-]+)$/)).find(Boolean);
      if (dur) parts.push([name, +dur[1]]);
    }
    el.timing.replaceChildren();
    const add = (label, ms) => {
      if (el.timing.childNodes.length) el.timing.append(' · ');
      const b = document.createElement('b');
      b.textContent = ms < 10 ? ms.toFixed(2) : ms.toFixed(1);
      el.timing.append(label + ' ', b, ' ms');
    };
    if (!parts.length) el.timing.append('no Server-Timing header');
    parts.forEach(([n, ms]) => add(n, ms));
    add('round trip', rtt);
  }

  async function run(ev) {
    if (ev) ev.preventDefault();
    clearError();
    let rows, body;
    const enc = el.encoding.value;
    let sparse;
    try {
      rows = parseEmb();
      sparse = rows.length > SPARSE_ABOVE;
      body = {
        embeddings: enc === 'base64' ? toB64(rows) : rows,
        causal: el.causal.checked, average_heads: el.average.checked,
        encoding_format: enc, need_weights: true,
      };
    } catch (e) { return showError(e); }
    if (el.model.value) body = { model: el.model.value, ...body };
    const request = sparse ? { ...body, weights_topk: TOPK } : body;
    busy(true);
    const t0 = performance.now();
    let res;
    try {
      res = await fetch('/attend', { method: 'POST', headers: headers(true), body: JSON.stringify(request) });
    } catch (e) {
      busy(false);
      return showError({ message: 'could not reach the server: ' + e.message, type: 'network' });
    }
    try {
      if (!res.ok) return showError(await readError(res));
      const data = await res.json();
      const rtt = performance.now() - t0;
      const O = tensor(data.output), u = data.usage || {};
      const W = sparse ? null : tensor(data.attention_weights);
      const T = sparse ? { idx: tensor(data.attention_topk.indices), val: tensor(data.attention_topk.values) } : null;
      st.result = { model: data.model, W, T, O, sparse, M: u.attended_keys || rows.length, body, causal: body.causal, serverAvg: body.average_heads, enc };
      st.outAll = false;
      st.row = null;
      timingText(res.headers.get('Server-Timing'), rtt);
      const heads = u.heads || (W ? W.shape[0] : T.val.shape[0]);
      setStatus(`${data.model}: ${rows.length} tokens, ${heads} heads${body.causal ? ', causal' : ''}, ${enc}` +
        (sparse ? `; top ${TOPK} weights of each row (sparse maps above ${SPARSE_ABOVE} tokens)` : ''));
      render();
    } catch (e) {
      showError({ message: 'could not read the response: ' + e.message, type: 'client' });
    } finally { busy(false); }
  }
  function busy(on) {
    el.run.disabled = on;
    el.run.textContent = on ? 'Running…' : 'Run attention';
    el.maps.setAttribute('aria-busy', on ? 'true' : 'false');
  }
  const setStatus = (s) => { el.status.textContent = s; };

  // ---------------------------------------------------------------- errors
  const FIELDS = [['embeddings', 'emb'], ['model', 'model'], ['causal', 'causal'], ['average_heads', 'average'],
    ['encoding_format', 'encoding'], ['weights_rows', 'rowPick'], ['authorization', 'key'], ['api key', 'key']];
  function fieldOf(err) {
    if (err.field) return err.field;
    if (err.type === 'model_not_found') return el.model;
    if (err.type === 'payload_too_large') return el.emb;
    const msg = (err.message || '').toLowerCase();
    let best = null, at = Infinity;
    for (const [word, key] of FIELDS) {
      const m = new RegExp('(^|[^a-z_])' + word + '($|[^a-z_])').exec(msg);
      if (m && m.index < at) { at = m.index; best = el[key]; }
    }
    return best;
  }
  function showError(err) {
    clearError();
    const t = document.createElement('span');
    t.className = 'etype';
    t.textContent = err.type + (err.status ? ` (${err.status})` : '');
    el.error.append(t, err.message);
    if (err.hint) { const p = document.createElement('div'); p.textContent = err.hint; el.error.append(p); }
    el.error.hidden = false;
    const f = fieldOf(err);
    if (f) {
      f.setAttribute('aria-invalid', 'true');
      f.setAttribute('aria-describedby', 'error');
      el.error.dataset.field = f.id;
      if (err.status === 401) f.focus();
    }
    setStatus('');
  }
  function clearError() {
    el.error.hidden = true;
    el.error.replaceChildren();
    delete el.error.dataset.field;
    for (const f of document.querySelectorAll('[aria-invalid]')) {
      f.removeAttribute('aria-invalid'); f.removeAttribute('aria-describedby');
    }
  }

  // ------------------------------------------------------------- heatmaps
  const STOPS = [[0, 247, 251, 255], [0.15, 212, 228, 244], [0.35, 142, 190, 222],
    [0.55, 74, 144, 200], [0.75, 34, 94, 168], [1, 12, 37, 94]];
  const LUT = new Uint8Array(256 * 3);
  for (let i = 0; i < 256; i++) {
    const t = i / 255;
    let s = 1;
    while (STOPS[s][0] < t) s++;
    const a = STOPS[s - 1], b = STOPS[s], f = (t - a[0]) / (b[0] - a[0]);
    for (let c = 0; c < 3; c++) LUT[3 * i + c] = Math.round(a[c + 1] + f * (b[c + 1] - a[c + 1]));
  }
  const rgb = (i) => `rgb(${LUT[3 * i]},${LUT[3 * i + 1]},${LUT[3 * i + 2]})`;

  function mapsOf(r) {
    if (r.sparse) return sparseMapsOf(r);
    const W = r.W, out = [];
    if (W.shape.length === 3) {
      const [H, n, m] = W.shape, size = n * m, avg = new Float64Array(size);
      for (let h = 0; h < H; h++) {
        const d = W.data.subarray(h * size, (h + 1) * size);
        for (let k = 0; k < size; k++) avg[k] += d[k];
        out.push({ key: String(h), title: `head ${h}`, n, m, data: d, f32: W.f32 });
      }
      for (let k = 0; k < size; k++) avg[k] /= H;
      out.push({ key: 'avg', title: 'mean over heads', note: 'computed in the page', n, m, data: avg, f32: false });
    } else if (W.shape.length === 2) {
      const [n, m] = W.shape;
      out.push({ key: 'avg', title: 'mean over heads', note: 'from the server', n, m, data: W.data, f32: W.f32 });
    }
    return out;
  }

  // Sparse maps: per head (or of the server's head average) the top-k keys
  // of every query row; data holds the values [n,k], idx the key indices.
  function sparseMapsOf(r) {
    const { idx, val } = r.T, out = [], m = r.M;
    const [n, k] = val.shape.slice(-2), planes = val.shape.length === 3 ? val.shape[0] : 1, size = n * k;
    for (let h = 0; h < planes; h++) {
      const avg = val.shape.length === 2;
      out.push({
        key: avg ? 'avg' : String(h), title: avg ? 'mean over heads' : `head ${h}`,
        note: avg ? `top ${k} of the average, from the server` : `top ${k} of ${m} keys a row`,
        n, m, k, sparse: true, f32: val.f32,
        data: val.data.subarray(h * size, (h + 1) * size), idx: idx.data.subarray(h * size, (h + 1) * size),
      });
    }
    return out;
  }

  function render() {
    hideTip();
    const r = st.result;
    st.maps = mapsOf(r);
    st.lastWidth = el.maps.clientWidth;
    el.maps.replaceChildren();
    for (const mp of st.maps) {
      const fig = document.createElement('figure');
      fig.className = 'hm';
      const cap = document.createElement('figcaption');
      cap.textContent = mp.title;
      if (mp.note) { const s = document.createElement('span'); s.textContent = ' · ' + mp.note; cap.append(s); }
      const cv = document.createElement('canvas');
      cv.dataset.testid = 'heatmap';
      cv.dataset.head = mp.key;
      cv.tabIndex = 0;
      cv.setAttribute('role', 'img');
      mp.cv = cv;
      mp.cur = null;
      wire(mp);
      fig.append(cap, cv);
      el.maps.append(fig);
    }
    el.rowBar.hidden = !r.sparse;
    el.rowView.hidden = true;
    el.rowInfo.textContent = '';
    el.rowPick.max = String(r.O.shape[r.O.shape.length - 2] - 1);
    el.axesDense.hidden = r.sparse;
    el.axesSparse.hidden = !r.sparse;
    relabel();
  }
  // (Re)compute scale, geometry and pictures: after a run, or when labels,
  // the colour scale or the page width change.
  function relabel() {
    if (!st.maps.length) return legend();
    let vmax = 0;
    if (el.scale.value === 'max') for (const mp of st.maps) for (const v of mp.data) if (v > vmax) vmax = v;
    st.vmax = vmax > 0 ? vmax : 1;
    legend();
    const avail = Math.max(160, el.maps.clientWidth);
    for (const mp of st.maps) {
      mp.labels = labels(Math.max(mp.n, mp.m));
      layout(mp, avail);
      paint(mp);
      draw(mp);
    }
    renderOutput();
    if (st.row) renderRow();
  }
  function legend() {
    const c = el.legend.getContext('2d'), w = el.legend.width, h = el.legend.height;
    for (let x = 0; x < w; x++) { c.fillStyle = rgb(Math.round((x / (w - 1)) * 255)); c.fillRect(x, 0, 1, h); }
    el.legLo.textContent = '0';
    el.legHi.textContent = el.scale.value === 'max' && st.maps.length ? st.vmax.toPrecision(4) : '1';
    el.legend.setAttribute('aria-label', `colour scale from 0 (light) to ${el.legHi.textContent} (dark)`);
  }
  function short(s, max) { return s.length > max ? s.slice(0, max - 1) + '…' : s; }
  function layout(mp, avail) {
    const { n, m, cv } = mp;
    const big = Math.max(n, m);
    const ctx = cv.getContext('2d');
    ctx.font = FONT;
    let lw = 0;
    for (let i = 0; i < big; i++) lw = Math.max(lw, ctx.measureText(short(mp.labels[i], 12)).width);
    lw = Math.ceil(Math.min(lw, 96));
    const left = lw + 8, top = lw + 8, pad = 4;
    let grid;
    if (big <= 32) { // small: as many maps a row as fit at >= 150 px, cells of 6..48 px
      const per = left + pad + 22, cols = Math.max(1, Math.min(st.maps.length, Math.floor((avail + 22) / (per + 150))));
      grid = Math.max(6, Math.min(48, Math.floor(Math.min(220, (avail + 22) / cols - per) / big))) * big;
    } else if (mp.sparse) { // sparse: two side by side when the page is wide enough
      grid = Math.max(256, Math.min(384, Math.floor((avail + 22) / 2) - 22 - left - pad));
    } else grid = Math.min(512, Math.max(256, big * 4)); // large: up to one pixel a cell
    grid = Math.max(big <= 32 ? 4 * big : 64, Math.min(grid, avail - left - pad));
    const cw = grid / big;
    const w = Math.ceil(left + cw * m + pad), h = Math.ceil(top + cw * n + pad);
    const dpr = Math.min(3, window.devicePixelRatio || 1);
    cv.width = Math.round(w * dpr);
    cv.height = Math.round(h * dpr);
    cv.style.width = w + 'px';
    mp.g = { left, top, cell: cw, gw: cw * m, gh: cw * n, w, h, dpr };
    Object.assign(cv.dataset, { gridX: left, gridY: top, cell: cw.toFixed(4), cssWidth: w });
    const dense = Math.ceil(14 / cw) > 1 ? ` Labels show every ${Math.ceil(14 / cw)}th token.` : '';
    cv.setAttribute('aria-label', mp.sparse
      ? `${mp.title}: the top ${mp.k} attention weights of each of ${n} query rows, over ${m} key columns.` +
        ` Up and Down move between rows, Left and Right between the row's top keys; Enter shows the whole row.${dense}`
      : `${mp.title}: attention weights W, ${n} query rows by ${m} key columns.` +
        ` Arrow keys move between cells; Home and End jump to the row ends.${dense}`);
  }
  // A sparse map is painted at the size it is drawn (device pixels): each
  // pixel holds the largest top-k weight that falls in it, the rest is 0.
  // Where a cell is under 2 pixels, a weight is a dot of 2 x 2 pixels, so a
  // row's top keys stay visible.
  function paintSparse(mp) {
    const { n, m, k, data, idx, g } = mp;
    const bw = Math.max(1, Math.min(m, Math.round(g.gw * g.dpr))), bh = Math.max(1, Math.min(n, Math.round(g.gh * g.dpr)));
    const dot = g.cell * g.dpr < 2 ? 2 : 1, bins = new Float32Array(bw * bh);
    for (let i = 0; i < n; i++) {
      const y0 = Math.floor((i * bh) / n);
      for (let q = 0; q < k; q++) {
        const x0 = Math.floor((idx[i * k + q] * bw) / m), v = data[i * k + q];
        for (let y = y0; y < Math.min(bh, y0 + dot); y++)
          for (let x = x0; x < Math.min(bw, x0 + dot); x++) if (v > bins[y * bw + x]) bins[y * bw + x] = v;
      }
    }
    const img = document.createElement('canvas');
    img.width = bw; img.height = bh;
    const c = img.getContext('2d'), id = c.createImageData(bw, bh), px = id.data, s = 255 / st.vmax;
    for (let p = 0; p < bins.length; p++) {
      const i = 3 * Math.max(0, Math.min(255, Math.round(bins[p] * s)));
      px[4 * p] = LUT[i]; px[4 * p + 1] = LUT[i + 1]; px[4 * p + 2] = LUT[i + 2]; px[4 * p + 3] = 255;
    }
    c.putImageData(id, 0, 0);
    mp.img = img;
  }
  function paint(mp) { // one pixel per cell, scaled when drawn
    if (mp.sparse) return paintSparse(mp);
    const { n, m, data } = mp;
    const img = mp.img && mp.img.width === m && mp.img.height === n ? mp.img : document.createElement('canvas');
    img.width = m; img.height = n;
    const c = img.getContext('2d'), id = c.createImageData(m, n), px = id.data, s = 255 / st.vmax;
    for (let k = 0; k < n * m; k++) {
      const i = 3 * Math.max(0, Math.min(255, Math.round(data[k] * s)));
      px[4 * k] = LUT[i]; px[4 * k + 1] = LUT[i + 1]; px[4 * k + 2] = LUT[i + 2]; px[4 * k + 3] = 255;
    }
    c.putImageData(id, 0, 0);
    mp.img = img;
  }
  function draw(mp) {
    const { cv, g, n, m, labels: lab, cur } = mp;
    const ctx = cv.getContext('2d');
    ctx.setTransform(g.dpr, 0, 0, g.dpr, 0, 0);
    ctx.clearRect(0, 0, g.w, g.h);
    ctx.imageSmoothingEnabled = !mp.sparse && g.cell < 1;
    ctx.drawImage(mp.img, g.left, g.top, g.gw, g.gh);
    if (g.cell >= 14) { // cell separators
      ctx.strokeStyle = 'rgba(255,255,255,0.7)';
      ctx.lineWidth = 1;
      ctx.beginPath();
      for (let j = 1; j < m; j++) { const x = g.left + j * g.cell; ctx.moveTo(x, g.top); ctx.lineTo(x, g.top + g.gh); }
      for (let i = 1; i < n; i++) { const y = g.top + i * g.cell; ctx.moveTo(g.left, y); ctx.lineTo(g.left + g.gw, y); }
      ctx.stroke();
    }
    ctx.strokeStyle = '#b9c2cf';
    ctx.strokeRect(g.left - 0.5, g.top - 0.5, g.gw + 1, g.gh + 1);
    // labels, thinned to one per ~14 px
    const step = Math.ceil(14 / g.cell);
    const named = (i) => (lab[i] !== `t${i}` ? `${i}·` : '') + lab[i];
    const text = (i) => (step > 1 ? named(i) : lab[i]);
    ctx.font = FONT;
    ctx.fillStyle = MUTED;
    ctx.textBaseline = 'middle';
    ctx.textAlign = 'right';
    for (let i = 0; i < n; i += step) ctx.fillText(short(text(i), 12), g.left - 5, g.top + (i + 0.5) * g.cell, g.left - 6);
    ctx.save();
    ctx.rotate(-Math.PI / 2);
    ctx.textAlign = 'left';
    for (let j = 0; j < m; j += step) ctx.fillText(short(text(j), 12), -(g.top - 5), g.left + (j + 0.5) * g.cell, g.top - 6);
    ctx.restore();
    if (!cur) return;
    // highlighted cell and its labels
    const x = g.left + cur.j * g.cell, y = g.top + cur.i * g.cell, c = Math.max(g.cell, 3);
    ctx.lineWidth = 2;
    ctx.strokeStyle = '#ffffff';
    ctx.strokeRect(x - 2, y - 2, c + 4, c + 4);
    ctx.strokeStyle = MARK;
    ctx.strokeRect(x - 1, y - 1, c + 2, c + 2);
    ctx.font = 'bold ' + FONT;
    ctx.fillStyle = '#ffffff';
    ctx.fillRect(0, y + g.cell / 2 - 8, g.left - 2, 16);
    ctx.fillStyle = INK;
    ctx.textAlign = 'right';
    ctx.fillText(short(named(cur.i), 14), g.left - 5, y + g.cell / 2, g.left - 6);
    ctx.save();
    ctx.rotate(-Math.PI / 2);
    ctx.fillStyle = '#ffffff';
    ctx.fillRect(-(g.top - 2), x + g.cell / 2 - 8, g.top - 2, 16);
    ctx.fillStyle = INK;
    ctx.textAlign = 'left';
    ctx.fillText(short(named(cur.j), 14), -(g.top - 5), x + g.cell / 2, g.top - 6);
    ctx.restore();
  }

  // ------------------------------------------------------ hover and keys
  function cellAt(mp, ev) {
    const r = mp.cv.getBoundingClientRect(), k = mp.g.w / r.width;
    const x = (ev.clientX - r.left) * k - mp.g.left, y = (ev.clientY - r.top) * k - mp.g.top;
    const i = Math.floor(y / mp.g.cell), j = Math.floor(x / mp.g.cell);
    return i >= 0 && j >= 0 && i < mp.n && j < mp.m ? { i, j } : null;
  }
  function cellPoint(mp) { // client coordinates of the cursor cell's lower right corner
    const r = mp.cv.getBoundingClientRect(), k = r.width / mp.g.w;
    return { x: r.left + (mp.g.left + (mp.cur.j + 1) * mp.g.cell) * k, y: r.top + (mp.g.top + (mp.cur.i + 1) * mp.g.cell) * k };
  }
  // On a sparse map the cursor is one of the row's top-k pairs: q, its
  // rank, and j, its key; snap(i, j) picks the pair of row i nearest key j.
  function snap(mp, i, j) {
    let q = 0;
    for (let p = 1; p < mp.k; p++) if (Math.abs(mp.idx[i * mp.k + p] - j) < Math.abs(mp.idx[i * mp.k + q] - j)) q = p;
    return pairAt(mp, i, q);
  }
  const pairAt = (mp, i, q) => ({ i, q, j: mp.idx[i * mp.k + q] });
  const valueAt = (mp) => (mp.sparse ? mp.data[mp.cur.i * mp.k + mp.cur.q] : mp.data[mp.cur.i * mp.m + mp.cur.j]);
  function setCur(mp, cur, pt) {
    for (const o of st.maps) if (o !== mp && o.cur) { o.cur = null; draw(o); }
    mp.cur = cur && mp.sparse && cur.q === undefined ? snap(mp, cur.i, cur.j) : cur;
    draw(mp);
    if (cur) showTip(mp, pt || cellPoint(mp)); else hideTip();
  }
  function wire(mp) {
    const cv = mp.cv;
    cv.addEventListener('mousemove', (ev) => {
      const c = cellAt(mp, ev);
      if (c) setCur(mp, c, { x: ev.clientX, y: ev.clientY });
      else if (document.activeElement !== cv) setCur(mp, null);
    });
    cv.addEventListener('mouseleave', () => {
      if (document.activeElement === cv && mp.cur) showTip(mp, cellPoint(mp)); else setCur(mp, null);
    });
    cv.addEventListener('focus', () => setCur(mp, mp.cur || (mp.sparse ? pairAt(mp, 0, 0) : { i: 0, j: 0 })));
    cv.addEventListener('blur', () => setCur(mp, null));
    if (mp.sparse) {
      cv.addEventListener('click', (ev) => { const c = cellAt(mp, ev); if (c) loadRow(c.i); });
      cv.addEventListener('keydown', (ev) => sparseKey(mp, ev));
      return;
    }
    cv.addEventListener('keydown', (ev) => {
      const c = mp.cur || { i: 0, j: 0 };
      let { i, j } = c;
      const page = Math.max(1, Math.round(mp.n / 10));
      switch (ev.key) {
        case 'ArrowUp': i--; break;
        case 'ArrowDown': i++; break;
        case 'ArrowLeft': j--; break;
        case 'ArrowRight': j++; break;
        case 'Home': j = 0; if (ev.ctrlKey) i = 0; break;
        case 'End': j = mp.m - 1; if (ev.ctrlKey) i = mp.n - 1; break;
        case 'PageUp': i -= page; break;
        case 'PageDown': i += page; break;
        case 'Escape': hideTip(); return;
        default: return;
      }
      ev.preventDefault();
      setCur(mp, { i: Math.max(0, Math.min(mp.n - 1, i)), j: Math.max(0, Math.min(mp.m - 1, j)) });
    });
  }
  function sparseKey(mp, ev) {
    const c = mp.cur || pairAt(mp, 0, 0);
    let { i, q } = c;
    const page = Math.max(1, Math.round(mp.n / 10));
    switch (ev.key) {
      case 'ArrowUp': i--; break;
      case 'ArrowDown': i++; break;
      case 'ArrowLeft': q--; break;
      case 'ArrowRight': q++; break;
      case 'Home': q = 0; if (ev.ctrlKey) i = 0; break;
      case 'End': q = mp.k - 1; if (ev.ctrlKey) i = mp.n - 1; break;
      case 'PageUp': i -= page; break;
      case 'PageDown': i += page; break;
      case 'Enter': ev.preventDefault(); loadRow(c.i); return;
      case 'Escape': hideTip(); return;
      default: return;
    }
    ev.preventDefault();
    setCur(mp, pairAt(mp, Math.max(0, Math.min(mp.n - 1, i)), Math.max(0, Math.min(mp.k - 1, q))));
  }
  function showTip(mp, pt) {
    const { i, j } = mp.cur, lab = mp.labels;
    const head = mp.title + (mp.note ? ` (${mp.note})` : '') + (mp.sparse ? ` · top ${mp.cur.q + 1} of ${mp.k}` : '');
    tipAt(head, `query ${i} (${lab[i]}) -> key ${j} (${lab[j]}): `, valueAt(mp), mp.f32, pt);
  }
  function tipAt(head, text, value, f32, pt) {
    const t = el.tip;
    const v = document.createElement('span');
    v.className = 'v';
    v.dataset.testid = 'tooltip-value';
    v.textContent = full(value, f32);
    const h = document.createElement('div');
    h.textContent = head;
    t.replaceChildren(h, text, v);
    t.hidden = false;
    const r = t.getBoundingClientRect();
    let x = pt.x + 14, y = pt.y + 14;
    if (x + r.width > window.innerWidth - 4) x = Math.max(4, pt.x - r.width - 14);
    if (y + r.height > window.innerHeight - 4) y = Math.max(4, pt.y - r.height - 14);
    t.style.left = x + 'px';
    t.style.top = y + 'px';
  }
  function hideTip() { el.tip.hidden = true; }

  // ------------------------------------------------------------- row view
  // One query row in full (weights_rows), a strip per head (or the head
  // average), after a click or Enter on a sparse map, or the row field.
  async function loadRow(i) {
    const r = st.result;
    if (!r || !r.sparse || !(i >= 0 && i < r.O.shape[r.O.shape.length - 2])) return;
    clearError();
    el.rowPick.value = String(i);
    el.rowInfo.textContent = `loading row ${i}…`;
    let res;
    try {
      res = await fetch('/attend', { method: 'POST', headers: headers(true), body: JSON.stringify({ ...r.body, weights_rows: [i] }) });
    } catch (e) {
      el.rowInfo.textContent = '';
      return showError({ message: 'could not reach the server: ' + e.message, type: 'network' });
    }
    try {
      if (!res.ok) { el.rowInfo.textContent = ''; return showError(await readError(res)); }
      const data = await res.json();
      if (st.result !== r) return; // a newer run replaced it
      const W = tensor(data.attention_weights), M = W.shape[W.shape.length - 1];
      const strips = W.shape.length === 3 ? W.shape[0] : 1;
      st.row = { i, W, M, strips, cur: null };
      el.rowInfo.textContent = `row ${i}: all ${M} weights${strips > 1 ? ` of ${strips} heads` : ''}`;
      el.rowView.hidden = false;
      renderRow();
    } catch (e) {
      showError({ message: 'could not read the response: ' + e.message, type: 'client' });
    }
  }
  function renderRow() {
    const rw = st.row, cv = el.rowCanvas, lab = labels(Math.max(rw.M, st.maps.length ? st.maps[0].n : 0));
    const ctx = cv.getContext('2d');
    const left = 64, strip = 18, gap = 3, top = 4;
    const avail = Math.max(160, el.maps.clientWidth);
    const gw = Math.max(64, Math.min(1024, avail - left - 8)), cell = gw / rw.M;
    const w = Math.ceil(left + gw + 4), h = top + rw.strips * (strip + gap) + 2;
    const dpr = Math.min(3, window.devicePixelRatio || 1);
    cv.width = Math.round(w * dpr);
    cv.height = Math.round(h * dpr);
    cv.style.width = w + 'px';
    rw.g = { left, top, strip, gap, cell, gw, w, h, dpr };
    Object.assign(cv.dataset, { gridX: left, gridY: top, cell: cell.toFixed(6), strip: strip + gap, cssWidth: w });
    cv.setAttribute('aria-label', `query row ${rw.i}: its ${rw.M} attention weights, one strip per ${rw.strips > 1 ? 'head' : 'head average'}.` +
      ' Left and Right move between keys, Up and Down between strips; Home and End jump to the ends.');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    const bw = Math.max(1, Math.round(gw * dpr)), s = 255 / st.vmax;
    for (let hh = 0; hh < rw.strips; hh++) {
      const row = rw.W.data.subarray(hh * rw.M, (hh + 1) * rw.M), bins = new Float32Array(Math.min(bw, rw.M));
      for (let j = 0; j < rw.M; j++) { const b = Math.floor((j * bins.length) / rw.M); if (row[j] > bins[b]) bins[b] = row[j]; }
      const img = ctx.createImageData(bins.length, 1);
      for (let b = 0; b < bins.length; b++) {
        const i = 3 * Math.max(0, Math.min(255, Math.round(bins[b] * s)));
        img.data[4 * b] = LUT[i]; img.data[4 * b + 1] = LUT[i + 1]; img.data[4 * b + 2] = LUT[i + 2]; img.data[4 * b + 3] = 255;
      }
      const tmp = document.createElement('canvas');
      tmp.width = bins.length; tmp.height = 1;
      tmp.getContext('2d').putImageData(img, 0, 0);
      const y = top + hh * (strip + gap);
      ctx.imageSmoothingEnabled = false;
      ctx.drawImage(tmp, left, y, gw, strip);
      ctx.font = FONT;
      ctx.fillStyle = MUTED;
      ctx.textAlign = 'right';
      ctx.textBaseline = 'middle';
      ctx.fillText(rw.strips > 1 ? `head ${hh}` : 'mean', left - 6, y + strip / 2);
    }
    if (rw.cur) {
      const x = left + rw.cur.j * cell, y = top + rw.cur.h * (strip + gap);
      ctx.lineWidth = 2;
      ctx.strokeStyle = MARK;
      ctx.strokeRect(x - 1, y - 1, Math.max(cell, 2) + 2, strip + 2);
    }
    rw.labels = lab;
  }
  function rowTip(pt) {
    const rw = st.row, { h, j } = rw.cur, lab = rw.labels;
    const head = `${rw.strips > 1 ? `head ${h}` : 'mean over heads'} · row ${rw.i} in full`;
    tipAt(head, `query ${rw.i} (${lab[rw.i]}) -> key ${j} (${lab[j]}): `, rw.W.data[h * rw.M + j], rw.W.f32, pt);
  }
  function rowPoint() {
    const rw = st.row, r = el.rowCanvas.getBoundingClientRect(), k = r.width / rw.g.w;
    return { x: r.left + (rw.g.left + (rw.cur.j + 1) * rw.g.cell) * k, y: r.top + (rw.g.top + rw.cur.h * (rw.g.strip + rw.g.gap) + rw.g.strip) * k };
  }
  function setRowCur(cur, pt) {
    const rw = st.row;
    if (!rw) return;
    rw.cur = cur;
    renderRow();
    if (cur) rowTip(pt || rowPoint()); else hideTip();
  }
  el.rowCanvas.addEventListener('mousemove', (ev) => {
    const rw = st.row;
    if (!rw) return;
    const r = el.rowCanvas.getBoundingClientRect(), k = rw.g.w / r.width;
    const x = (ev.clientX - r.left) * k - rw.g.left, y = (ev.clientY - r.top) * k - rw.g.top;
    const j = Math.floor(x / rw.g.cell), h = Math.floor(y / (rw.g.strip + rw.g.gap));
    if (j >= 0 && j < rw.M && h >= 0 && h < rw.strips) setRowCur({ h, j }, { x: ev.clientX, y: ev.clientY });
  });
  el.rowCanvas.addEventListener('mouseleave', () => { if (document.activeElement !== el.rowCanvas) hideTip(); });
  el.rowCanvas.addEventListener('focus', () => setRowCur((st.row && st.row.cur) || { h: 0, j: 0 }));
  el.rowCanvas.addEventListener('blur', () => { if (st.row) { st.row.cur = null; renderRow(); } hideTip(); });
  el.rowCanvas.addEventListener('keydown', (ev) => {
    const rw = st.row;
    if (!rw) return;
    let { h, j } = rw.cur || { h: 0, j: 0 };
    const page = Math.max(1, Math.round(rw.M / 10));
    switch (ev.key) {
      case 'ArrowLeft': j--; break;
      case 'ArrowRight': j++; break;
      case 'ArrowUp': h--; break;
      case 'ArrowDown': h++; break;
      case 'Home': j = 0; break;
      case 'End': j = rw.M - 1; break;
      case 'PageUp': j -= page; break;
      case 'PageDown': j += page; break;
      case 'Escape': hideTip(); return;
      default: return;
    }
    ev.preventDefault();
    setRowCur({ h: Math.max(0, Math.min(rw.strips - 1, h)), j: Math.max(0, Math.min(rw.M - 1, j)) });
  });

  // ---------------------------------------------------------------- output
  function renderOutput() {
    const r = st.result;
    if (!r) return;
    const O = r.O, [n, e] = O.shape.length === 2 ? O.shape : [1, O.data.length];
    const cols = st.outAll ? e : Math.min(e, 8), rows = st.outAll ? n : Math.min(n, 64);
    const cut = cols < e || rows < n, lab = labels(n);
    const lw = Math.min(14, Math.max(5, ...lab.slice(0, rows).map((s, i) => `${i} ${s}`.length)));
    const num = (x) => (Math.abs(x) >= 1e5 ? x.toExponential(2) : x.toFixed(4)).padStart(10);
    const lines = ['Y'.padEnd(lw) + ' ' + Array.from({ length: cols }, (_, k) => `[${k}]`.padStart(10)).join('') + (cols < e ? '   …' : '')];
    for (let i = 0; i < rows; i++) {
      let s = short(`${i} ${lab[i]}`, 14).padEnd(lw) + ' ';
      for (let k = 0; k < cols; k++) s += num(O.data[i * e + k]);
      lines.push(s + (cols < e ? '   …' : ''));
    }
    if (rows < n) lines.push(`… ${n - rows} more rows`);
    el.out.textContent = lines.join('\n');
    el.outInfo.textContent = `${n} × ${e}, rounded to 4 decimals` + (cut ? ` · showing ${rows} × ${cols}` : '');
    el.outToggle.hidden = !cut && !st.outAll;
    el.outToggle.textContent = st.outAll ? 'Show fewer' : `Show all ${n} × ${e}`;
    el.outToggle.setAttribute('aria-expanded', String(st.outAll));
  }

  // ---------------------------------------------------------------- wiring
  el.form.addEventListener('submit', run);
  el.example.addEventListener('click', () => generate('example'));
  el.random.addEventListener('click', () => generate('random'));
  el.file.addEventListener('change', loadFile);
  el.model.addEventListener('change', () => { clearError(); modelInfo(); });
  el.key.addEventListener('change', loadModels);
  el.scale.addEventListener('change', relabel);
  el.outToggle.addEventListener('click', () => { st.outAll = !st.outAll; renderOutput(); });
  el.rowShow.addEventListener('click', () => loadRow(Math.floor(+el.rowPick.value)));
  el.rowPick.addEventListener('keydown', (ev) => { if (ev.key === 'Enter') { ev.preventDefault(); loadRow(Math.floor(+el.rowPick.value)); } });
  let tLab = 0, tEmb = 0, tRes = 0;
  el.labels.addEventListener('input', () => { clearTimeout(tLab); tLab = setTimeout(relabel, 150); });
  el.emb.addEventListener('input', () => {
    if (el.emb.getAttribute('aria-invalid')) clearError();
    clearTimeout(tEmb); tEmb = setTimeout(embInfo, 300);
  });
  el.emb.addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && (ev.ctrlKey || ev.metaKey)) { ev.preventDefault(); el.form.requestSubmit(); }
  });
  window.addEventListener('resize', () => {
    clearTimeout(tRes);
    tRes = setTimeout(() => { if (st.maps.length && el.maps.clientWidth !== st.lastWidth) { st.lastWidth = el.maps.clientWidth; hideTip(); relabel(); } }, 150);
  });
  window.addEventListener('scroll', () => {
    if (!el.tip.hidden && !st.maps.some((mp) => mp.cv === document.activeElement) && document.activeElement !== el.rowCanvas) hideTip();
  }, { passive: true });
  legend();
  loadModels();
})();
