#!/usr/bin/env node
// check-openapi - docs/openapi.yaml (served at GET /openapi.yaml) is a valid
// OpenAPI 3.0.3 document that describes every route the server has. No
// server is started.
//   tests/openapi/check-openapi.js [FILE]     (make test and make test-openapi)
//
// The validator is @apidevtools/swagger-parser (npm, pinned by the
// package-lock.json beside this file; `make openapi-deps` installs it): YAML
// parsing that refuses duplicate keys, the official OpenAPI 3.0 JSON schema,
// then its semantic checks (every $ref resolves, path parameters declared,
// operationIds unique). openapi-spec-validator, when the python3 on PATH has
// it, gives a second opinion; without it that check is skipped.
//
// On top of the validators: the routes of the server's route table are all
// documented with their method and none else is; key-protected routes say so and answer 401; error
// answers carry the headers API.md promises; the v2 infer routes describe
// the binary tensor extension.
// Last line: "N passed, N failed"; exit status 1 on any failure.
'use strict';
const path = require('path');
const { spawnSync } = require('child_process');
const SwaggerParser = require('@apidevtools/swagger-parser');

const ROOT = path.resolve(__dirname, '..', '..');
const FILE = path.resolve(process.argv[2] || path.join(ROOT, 'docs', 'openapi.yaml'));

// Every route of both APIs, read from the server's route table (the rows of
// `routes[]` in server/http.c): method, path template, whether the API key
// applies. The playground's files ({asset}) are the files of web/ (index.html
// is served at /). So the document is checked against what the server
// routes, not against a list kept by hand.
const fs = require('fs');
function serverRoutes() {
  const src = fs.readFileSync(path.join(ROOT, 'server', 'http.c'), 'utf8');
  const table = src.slice(src.indexOf('static const route routes[] = {'));
  const rows = [...table.slice(0, table.indexOf('};')).matchAll(
    /\{"(GET|POST)", "([^"]+)", [A-Za-z0-9_]+, [A-Z0-9_]+, (true|false)\}/g)];
  const out = [];
  for (const [, m, p, auth] of rows) {
    if (p.includes('{asset}')) {
      for (const f of fs.readdirSync(path.join(ROOT, 'web')))
        if (f !== 'index.html') out.push([m.toLowerCase(), '/' + f, auth === 'true']);
    } else {
      out.push([m.toLowerCase(), p, auth === 'true']);
    }
  }
  if (out.length < 10) throw new Error(`server/http.c: only ${out.length} routes found in routes[]`);
  return out;
}
// The document may name a path parameter differently ({name} for {model}).
const norm = (p) => p.replace(/\{[^}]+\}/g, '{}');
const ROUTES = serverRoutes();
const INFER = ['/v2/models/{model}/infer', '/v2/models/{model}/versions/{version}/infer'];
// The error codes, from the one table in server/errors.h.
const ERROR_TYPES = [...fs.readFileSync(path.join(ROOT, 'server', 'errors.h'), 'utf8')
  .matchAll(/X\([A-Z_]+, \d+, "([a-z_]+)"\)/g)].map((x) => x[1]);
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

let passed = 0, failed = 0;
async function check(name, fn) {
  try {
    const note = await fn();
    passed++;
    console.log(`ok   ${name}${note ? ': ' + note : ''}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e && e.message ? e.message : String(e)}`);
  }
}
function assert(cond, msg) { if (!cond) throw new Error(msg); }

// A key written with no value: what an unquoted ", " or ": " inside a flow
// mapping leaves behind ({description: a, b} gives the key "b").
function nullKeys(node, where, out) {
  if (Array.isArray(node)) node.forEach((v, i) => nullKeys(v, `${where}[${i}]`, out));
  else if (node && typeof node === 'object')
    for (const [k, v] of Object.entries(node)) {
      if (v === null) out.push(`${where}/${k}`);
      else nullKeys(v, `${where}/${k}`, out);
    }
  return out;
}

// Follow a local $ref (one level is all this document uses at a time).
function deref(doc, node) {
  while (node && node.$ref) {
    assert(node.$ref.startsWith('#/'), `non-local $ref ${node.$ref}`);
    node = node.$ref.slice(2).split('/').reduce((n, k) => n && n[k.replace(/~1/g, '/').replace(/~0/g, '~')], doc);
  }
  return node;
}

async function main() {
  console.log(`check-openapi: ${path.relative(process.cwd(), FILE) || FILE}`);
  let doc = null;

  await check('YAML parses (no duplicate keys)', async () => {
    doc = await SwaggerParser.parse(FILE);
    return `openapi ${doc.openapi}, ${Object.keys(doc.paths || {}).length} paths`;
  });
  if (!doc) return;

  await check('swagger-parser validates it against OpenAPI 3.0', async () => {
    try {
      await SwaggerParser.validate(FILE);
    } catch (e) {
      // ajv explains each failed oneOf branch; keep the lines that say
      // what is wrong rather than which alternative did not match
      const lines = String(e.message).split('\n').map((l) => l.trim()).filter(Boolean);
      const telling = lines.filter((l) => !/must match exactly one schema in oneOf|must have required property '\$ref'/.test(l));
      const shown = (telling.length > 1 ? telling : lines).slice(0, 10);
      throw new Error(shown.join('\n    ') + (lines.length > shown.length ? `\n    (${lines.length - shown.length} more lines)` : ''));
    }
    const v = require('@apidevtools/swagger-parser/package.json').version;
    return `@apidevtools/swagger-parser ${v}`;
  });

  await check('openapi is 3.0.x', () => assert(/^3\.0\.\d+$/.test(String(doc.openapi)),
    `openapi: ${doc.openapi}`));

  await check('no key without a value (an unquoted comma or colon in a flow mapping)', () => {
    const bad = nullKeys(doc, '#', []);
    assert(!bad.length, `${bad.length} stray key(s): ${bad.slice(0, 5).join(', ')}`);
  });

  // the document's path for a route's template, whatever its parameter names
  const docPath = {};
  for (const p of Object.keys(doc.paths)) docPath[norm(p)] = p;
  const opOf = (m, p) => doc.paths[docPath[norm(p)]] && doc.paths[docPath[norm(p)]][m];

  await check('every route is documented with its method', () => {
    const missing = ROUTES.filter(([m, p]) => !opOf(m, p))
      .map(([m, p]) => `${m.toUpperCase()} ${p}`);
    assert(!missing.length, `missing: ${missing.join(', ')}`);
    return `${ROUTES.length} routes`;
  });

  await check('no route is documented that the server does not have', () => {
    const known = new Set(ROUTES.map(([m, p]) => `${m} ${norm(p)}`));
    const extra = [];
    for (const [p, item] of Object.entries(doc.paths))
      for (const m of METHODS)
        if (item[m] && !known.has(`${m} ${norm(p)}`)) extra.push(`${m.toUpperCase()} ${p}`);
    assert(!extra.length, `not in server/http.c's route table: ${extra.join(', ')}`);
  });

  await check('the API key: optional bearer and a 401 on key routes, none on open ones', () => {
    const bad = [];
    for (const [m, p, keyed] of ROUTES) {
      const op = opOf(m, p);
      if (!op) continue;
      const sec = op.security || doc.security || [];
      const bearer = sec.some((s) => s && 'bearer' in s);
      const anonymous = sec.length === 0 || sec.some((s) => s && !Object.keys(s).length);
      if (keyed && !(bearer && anonymous && op.responses['401']))
        bad.push(`${m.toUpperCase()} ${p} needs security [{bearer: []}, {}] and a 401`);
      if (!keyed && (bearer || op.responses['401'])) bad.push(`${m.toUpperCase()} ${p} is open`);
    }
    assert(!bad.length, bad.join('; '));
  });

  await check('error answers: JSON Error body, 503 Retry-After, 401 WWW-Authenticate, 405 Allow', () => {
    const want = { 503: 'Retry-After', 401: 'WWW-Authenticate', 405: 'Allow' };
    const bad = [];
    let n = 0;
    for (const [p, item] of Object.entries(doc.paths))
      for (const m of METHODS) {
        if (!item[m]) continue;
        for (const [status, r0] of Object.entries(item[m].responses)) {
          if (!/^[45]/.test(status)) continue;
          n++;
          const r = deref(doc, r0);
          const where = `${m.toUpperCase()} ${p} ${status}`;
          const schema = r.content && r.content['application/json'] && r.content['application/json'].schema;
          if (!schema || schema.$ref !== '#/components/schemas/Error') bad.push(`${where}: no Error body`);
          if (want[status] && !(r.headers && r.headers[want[status]])) bad.push(`${where}: no ${want[status]}`);
        }
      }
    assert(!bad.length, bad.join('; '));
    return `${n} error answers`;
  });

  await check('error_type lists every error code', () => {
    const e = doc.components.schemas.Error.properties.error_type.enum || [];
    const missing = ERROR_TYPES.filter((t) => !e.includes(t));
    const extra = e.filter((t) => !ERROR_TYPES.includes(t));
    assert(!missing.length && !extra.length, `missing [${missing}] extra [${extra}]`);
  });

  await check('v2 infer: JSON and application/octet-stream both ways, Inference-Header-Content-Length', () => {
    const bad = [];
    for (const p of INFER) {
      const op = doc.paths[p] && doc.paths[p].post;
      if (!op) { bad.push(`POST ${p} is missing`); continue; }
      const body = deref(doc, op.requestBody) || {};
      const ok = deref(doc, op.responses['200']) || {};
      const params = (op.parameters || []).map((x) => deref(doc, x));
      for (const [what, c] of [['request', body.content], ['answer', ok.content]])
        for (const t of ['application/json', 'application/octet-stream'])
          if (!(c && c[t])) bad.push(`${p}: ${what} has no ${t}`);
      if (!params.some((x) => x.in === 'header' && x.name === 'Inference-Header-Content-Length'))
        bad.push(`${p}: no Inference-Header-Content-Length request header`);
      if (!(ok.headers && ok.headers['Inference-Header-Content-Length']))
        bad.push(`${p}: no Inference-Header-Content-Length answer header`);
      if (!/Inference-Header-Content-Length/.test(body.description || ''))
        bad.push(`${p}: the request body's description does not explain the binary framing`);
    }
    assert(!bad.length, bad.join('; '));
  });

  // A second, independent validator where this machine has one.
  const py = spawnSync('python3', ['-c', 'import openapi_spec_validator'], { encoding: 'utf8' });
  if (py.error || py.status !== 0) {
    console.log('skip openapi-spec-validator: not installed for python3 (swagger-parser decides)');
  } else {
    await check('openapi-spec-validator validates it too', () => {
      const r = spawnSync('python3', ['-m', 'openapi_spec_validator', FILE], { encoding: 'utf8' });
      const out = (r.stdout + r.stderr).trim();
      assert(r.status === 0, out.split('\n').slice(0, 8).join(' | '));
      return out.split('\n').pop();
    });
  }
}

main().catch((e) => { failed++; console.log(`FAIL ${e && e.stack ? e.stack : e}`); })
  .finally(() => {
    console.log(`${passed} passed, ${failed} failed`);
    process.exitCode = failed ? 1 : 0;
  });
