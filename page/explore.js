'use strict';
// explore.js: the page of bin/explore. The model runs in WebAssembly
// (page/page_model.c: the project's own forward, compiled from the same C
// sources); this script only moves text in and numbers out, and draws.
//
// Letters as in model/gpt.h: L layers, NH heads, T the context, V the
// vocabulary, C the width, hs = C/NH. n is the text's length in known
// characters (at most T), ids its token ids.

const D = JSON.parse(document.getElementById('data').textContent);
const cfg = D.config;
const L = cfg.layers, NH = cfg.heads, T = cfg.context, V = cfg.vocab_size, C = cfg.dim;
const hs = C / NH;
const UNITS = L * (NH + 2);           // interpret.h's units: the heads, then each layer's attention and MLP
const NUM_SCORES = D.scoreNames.length;
const ATTENTION_SCORES = 7;           // the scores before copying are the attention's (head_scores.h)
const idOf = new Map(D.vocab.map((c, i) => [c, i]));
const $ = id => document.getElementById(id);

// ---- bytes, the module and its five system calls

function bytesOf(base64) {
  const s = atob(base64.trim()), b = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) b[i] = s.charCodeAt(i);
  return b;
}

let wasm = null;
const mem = () => wasm.memory.buffer;
const f32 = (ptr, n) => new Float32Array(mem(), ptr, n);
const f64 = (ptr, n) => new Float64Array(mem(), ptr, n);

// What the C library asks of the system: writing to stderr (die()'s
// message, shown in the status line) and exiting; nothing else is needed.
function wasiImports() {
  let stderr = '';
  const EBADF = 8, ENOSYS = 52;
  return {
    fd_write(fd, iovs, count, written) {
      const view = new DataView(mem());
      let total = 0;
      for (let i = 0; i < count; i++) {
        const ptr = view.getUint32(iovs + 8 * i, true), len = view.getUint32(iovs + 8 * i + 4, true);
        stderr += new TextDecoder().decode(new Uint8Array(mem(), ptr, len));
        total += len;
      }
      view.setUint32(written, total, true);
      return 0;
    },
    proc_exit(code) { throw new Error(stderr.trim() || 'the model exited with status ' + code); },
    fd_close() { return EBADF; },
    fd_fdstat_get() { return EBADF; },
    fd_seek() { return ENOSYS; },
  };
}

// One model in WebAssembly memory (a Page of page_model.c).
class PageModel {
  constructor() {
    const errLen = 512, err = wasm.page_alloc(errLen), choices = wasm.page_alloc(4 * cfg.choices.length);
    f32(choices, cfg.choices.length).set(cfg.choices);
    this.ptr = wasm.page_new(V, T, L, NH, C, choices, err, errLen);
    const message = new TextDecoder().decode(new Uint8Array(mem(), err, errLen)).split('\0')[0];
    wasm.page_release(err);
    wasm.page_release(choices);
    if (!this.ptr) throw new Error(message);
    this.model = -1;
  }
  // Model k of D.models: its weights copied in (base64 decoded once).
  load(k) {
    if (this.model === k) return;
    f32(wasm.page_params(this.ptr), wasm.page_num_params(this.ptr)).set(weightsOf(k));
    wasm.page_weights_changed(this.ptr);
    this.model = k;
  }
  setTokens(ids) { new Int32Array(mem(), wasm.page_tokens(this.ptr), ids.length).set(ids); }
  run(ids, off, kind) {
    this.setTokens(ids);
    new Uint8Array(mem(), wasm.page_ablated(this.ptr), UNITS).set(off);
    const start = performance.now();
    const loss = wasm.page_run(this.ptr, ids.length, kind);
    this.runMs = performance.now() - start;
    this.n = ids.length;
    return loss;
  }
  attention(l, h) { return f32(wasm.page_attention(this.ptr, l, h), this.n * this.n); }
  probs(t) { return f32(wasm.page_probs(this.ptr) + 4 * t * V, V); }
  losses() { return f32(wasm.page_losses(this.ptr), Math.max(0, this.n - 1)); }
  cleanLosses() { return f32(wasm.page_clean_losses(this.ptr), Math.max(0, this.n - 1)); }
  cleanLoss() { return wasm.page_clean_loss(this.ptr); }
  // head h's scores: [value, uniform] for each score
  scores(h) {
    const s = f64(wasm.page_scores(this.ptr) + 8 * 2 * NUM_SCORES * h, 2 * NUM_SCORES);
    return Array.from({length: NUM_SCORES}, (_, k) => [s[k], s[NUM_SCORES + k]]);
  }
  headType(h) { return wasm.page_head_type(this.ptr, h); }
  // depth d (0..L) at position t: [top id, its probability, the true next's]
  lens(d, t) { return Array.from(f64(wasm.page_lens(this.ptr) + 8 * 3 * (d * this.n + t), 3)); }
  arithmetic(l, h, t) {
    wasm.page_head_arithmetic(this.ptr, l, h, t);
    const a = f32(wasm.page_arithmetic(this.ptr), (t + 1) * (hs + 2) + hs), k = t + 1;
    return {scores: a.slice(0, k), weights: a.slice(k, 2 * k), values: a.slice(2 * k, 2 * k + k * hs),
            out: a.slice(2 * k + k * hs, 2 * k + k * hs + hs)};
  }
}

const weightCache = new Map();
function weightsOf(k) {
  if (!weightCache.has(k)) {
    const text = document.querySelector('script.weights[data-model="' + k + '"]').textContent;
    weightCache.set(k, new Float32Array(bytesOf(text).buffer));
  }
  return weightCache.get(k);
}

// ---- the page's state

const S = {
  model: 0,                  // index into D.models (0: the checkpoint)
  layer: 0, head: 0,         // the head shown large
  pos: -1,                   // the chosen query position (-1: the last)
  loss: NaN,                 // the last run's mean loss
  off: new Uint8Array(UNITS), kind: 1,
  temperature: 1,            // the arithmetic panel's softmax temperature
  ids: [], chars: [],        // the known characters' ids and code points
  compare: false, compareLayer: 0, compareHead: 0, compareModel: 0,
  writing: false,
};
let main = null, second = null;
const order = D.models.map((m, k) => k).sort((a, b) => {   // the slider: snapshots by step, then the checkpoint
  const sa = D.models[a].step < 0 ? Infinity : D.models[a].step, sb = D.models[b].step < 0 ? Infinity : D.models[b].step;
  return sa - sb;
});

function shown(c) {
  return c === 32 ? '\u2423' : c === 10 ? '\u21b5' : c === 9 ? '\u21e5' : String.fromCodePoint(c);
}
function color(x) {
  const k = Math.max(0, Math.min(255, Math.round(x * 255)));
  return '#' + D.colormap.substr(6 * k, 6);
}
function lossColor(loss) {             // white (0 nats) to red (4 or more)
  const t = Math.max(0, Math.min(1, loss / 4));
  return 'rgb(255,' + Math.round(255 - 170 * t) + ',' + Math.round(255 - 190 * t) + ')';
}
function modelLabel(k) {
  return D.models[k].step < 0 ? 'the checkpoint' : 'step ' + D.models[k].step;
}
function unitLabel(u) {
  if (u < L * NH) return 'layer ' + Math.floor(u / NH) + ' head ' + u % NH;
  const l = Math.floor((u - L * NH) / 2);
  return 'layer ' + l + ((u - L * NH) % 2 ? ' MLP' : ' attention');
}
function el(tag, attrs, text) {
  const e = document.createElement(tag);
  Object.entries(attrs || {}).forEach(([k, v]) => e.setAttribute(k, v));
  if (text !== undefined) e.textContent = text;
  return e;
}

// ---- the text: known characters become ids; unknown ones are marked and
// skipped (as bin/attn --skip-unknown); past the context, the last T stay.

function readText() {
  const caret = S.pos === -2;
  const all = Array.from($('text').value, ch => ch.codePointAt(0));
  const known = [];
  all.forEach((c, i) => { if (idOf.has(c)) known.push(i); });
  const unknown = all.length - known.length, cut = Math.max(0, known.length - T);
  const kept = known.slice(cut);
  S.ids = kept.map(i => idOf.get(all[i]));
  S.chars = kept.map(i => all[i]);
  S.shown = all.map((c, i) => ({c, known: idOf.has(c), at: -1, i}));
  kept.forEach((i, p) => { S.shown[i].at = p; });
  const notes = [];
  if (unknown) {
    const first = all.find(c => !idOf.has(c));
    notes.push(unknown + ' character' + (unknown > 1 ? 's' : '') + ' outside the vocabulary (the first: \u2018' +
               shown(first) + '\u2019), struck through and skipped');
  }
  if (cut) notes.push('longer than the context: the model reads the last ' + T + ' characters');
  $('textnote').textContent = notes.join('; ');
  if (caret) S.pos = caretPosition();
  if (S.pos >= S.ids.length) S.pos = -1;
}

// The position the caret stands after, among the known characters.
function caretPosition() {
  const box = $('text'), before = Array.from(box.value.slice(0, box.selectionStart)).length;
  let p = -1;
  for (let i = 0; i < before && i < S.shown.length; i++) if (S.shown[i].at >= 0) p = S.shown[i].at;
  return p;
}
const chosen = () => (S.pos >= 0 && S.pos < S.ids.length ? S.pos : S.ids.length - 1);

// ---- running the model: everything it shows, then every drawing

// Keystrokes come faster than a large model runs: an input asks for a run,
// and the run, when it comes, reads the text as it is then.
let pending = false;
function schedule() {
  if (pending) return;
  pending = true;
  setTimeout(() => { if (pending) run(); }, 0);
}
function flush() { if (pending) run(); }

function run() {
  pending = false;
  readText();
  const n = S.ids.length;
  document.body.dataset.n = n;
  if (n === 0) {
    $('lossline').textContent = 'type some text';
    ['chars', 'next', 'lens', 'arith', 'scores'].forEach(id => { $(id).textContent = ''; });
    clearCanvas('overview'); clearCanvas('head');
    return;
  }
  main.load(S.model);
  const loss = main.run(S.ids, S.off, S.kind);
  if (S.compare) {
    second = second || new PageModel();
    second.load(S.compareModel);
    second.run(S.ids, new Uint8Array(UNITS), 0);
  }
  document.body.dataset.runMs = main.runMs.toFixed(2);
  S.loss = loss;
  draw();
}

// Every panel, from what the last run computed.
function draw() {
  drawChars(); drawLoss(S.loss); drawOverview(); drawHead(); drawNext(); drawLens(); drawArithmetic();
  drawScores(); drawAblation();
}

// After a choice of what to show (a position, a head), not of what the
// model computes: the panels read the last run's numbers again.
function redraw() { if (!pending && S.ids.length) draw(); }

function clearCanvas(id) { const c = $(id); c.width = c.height = 1; }

function drawChars() {
  const box = $('chars'), losses = main.losses(), t = chosen();
  box.textContent = '';
  S.shown.forEach(s => {
    const span = el('span', {}, shown(s.c));
    if (!s.known) { span.className = 'unknown'; span.title = 'outside the vocabulary: skipped'; }
    else if (s.at >= 0) {
      span.dataset.pos = s.at;
      if (s.at > 0) {
        const x = losses[s.at - 1];
        span.style.background = lossColor(x);
        span.title = 'position ' + s.at + ': loss ' + x.toFixed(4) + ' predicting it';
      } else span.title = 'position 0: nothing predicts it';
      if (s.at === t) span.className = 'sel';
      span.onclick = () => { S.pos = s.at; redraw(); };
    } else span.className = 'u';
    box.appendChild(span);
  });
}

function drawLoss(loss) {
  const n = S.ids.length, box = $('lossline');
  box.dataset.loss = Number.isFinite(loss) ? loss.toFixed(6) : '';
  box.dataset.cleanLoss = Number.isFinite(main.cleanLoss()) ? main.cleanLoss().toFixed(6) : '';
  if (n < 2) { box.textContent = 'one character: nothing to predict yet'; return; }
  const off = S.off.reduce((a, b) => a + b, 0);
  let s = 'loss ' + loss.toFixed(4) + ' nats a character over ' + (n - 1) + ' predictions';
  if (off) s += ' with ' + off + ' part' + (off > 1 ? 's' : '') + ' off (' + (S.kind === 2 ? 'mean' : 'zero') +
                '); ' + main.cleanLoss().toFixed(4) + ' with everything on, ' +
                (loss - main.cleanLoss() >= 0 ? '+' : '') + (loss - main.cleanLoss()).toFixed(4);
  box.textContent = s + ' \u2014 ' + modelLabel(S.model) + ', forward ' + main.runMs.toFixed(1) + ' ms';
}

// The overview: a tile a head, layer by layer.
function overviewGeometry() {
  const n = S.ids.length, cell = Math.max(1, Math.floor(120 / n));
  return {cell, tile: cell * n + 10, x0: 54, y0: 18};
}

function drawTile(cx, a, n, x0, y0, cell) {
  const image = cx.createImageData(n * cell, n * cell);
  for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) {
    let r, g, b;
    if (j > i) { const v = (Math.floor(i * cell / 3) + Math.floor(j * cell / 3)) % 2 ? 0xb0 : 0x88; r = g = b = v; }
    else { const hex = color(a[i * n + j]); r = parseInt(hex.substr(1, 2), 16); g = parseInt(hex.substr(3, 2), 16); b = parseInt(hex.substr(5, 2), 16); }
    for (let y = 0; y < cell; y++) for (let x = 0; x < cell; x++) {
      const o = 4 * ((i * cell + y) * n * cell + j * cell + x);
      image.data[o] = r; image.data[o + 1] = g; image.data[o + 2] = b; image.data[o + 3] = 255;
    }
  }
  cx.putImageData(image, x0, y0);
}

function drawOverview() {
  const n = S.ids.length, g = overviewGeometry(), cv = $('overview'), cx = cv.getContext('2d');
  cv.width = g.x0 + NH * g.tile; cv.height = g.y0 + L * g.tile;
  cx.fillStyle = '#fff'; cx.fillRect(0, 0, cv.width, cv.height);
  cx.font = '11px sans-serif';
  for (let l = 0; l < L; l++) {
    cx.fillStyle = '#222'; cx.fillText('layer ' + l, 2, g.y0 + l * g.tile + 12);
    for (let h = 0; h < NH; h++) {
      const x = g.x0 + h * g.tile, y = g.y0 + l * g.tile;
      if (l === 0) { cx.fillStyle = '#222'; cx.fillText('head ' + h, x, 12); }
      drawTile(cx, main.attention(l, h), n, x, y, g.cell);
      const type = main.headType(l * NH + h);
      if (S.off[l * NH + h]) {
        cx.fillStyle = 'rgba(0,0,0,0.6)'; cx.fillRect(x, y, n * g.cell, n * g.cell);
        cx.fillStyle = '#fff'; cx.fillText('off', x + 3, y + 12);
      } else if (type >= 0) {
        cx.fillStyle = 'rgba(255,255,255,0.85)'; cx.fillRect(x, y, 38, 13);
        cx.fillStyle = '#222'; cx.fillText(D.scoreTags[type], x + 2, y + 10);
      }
      if (l === S.layer && h === S.head) {
        cx.strokeStyle = '#f40'; cx.lineWidth = 2; cx.strokeRect(x - 1, y - 1, n * g.cell + 2, n * g.cell + 2);
      }
    }
  }
}

// The head under the pointer: [layer, head], or null.
function tileAt(e) {
  const g = overviewGeometry(), r = e.target.getBoundingClientRect();
  const h = Math.floor((e.clientX - r.left - g.x0) / g.tile), l = Math.floor((e.clientY - r.top - g.y0) / g.tile);
  return h >= 0 && l >= 0 && h < NH && l < L ? [l, h] : null;
}
$('overview').addEventListener('click', e => { const t = tileAt(e); if (t) selectHead(t[0], t[1]); });
$('overview').addEventListener('dblclick', e => {   // switch the head off (or on again)
  const t = tileAt(e);
  if (t) { S.off[t[0] * NH + t[1]] ^= 1; run(); }
});

function selectHead(l, h) { S.layer = l; S.head = h; redraw(); }

// One head large, the characters along both axes.
function headGeometry() {
  const n = S.ids.length;
  return {cell: Math.max(4, Math.min(16, Math.floor(440 / n))), x0: 22, y0: 22};
}

function drawHeadOn(id, model, l, h, title) {
  const n = S.ids.length, g = headGeometry(), cv = $(id), cx = cv.getContext('2d');
  cv.width = g.x0 + n * g.cell + 4; cv.height = g.y0 + n * g.cell + 4;
  cx.fillStyle = '#fff'; cx.fillRect(0, 0, cv.width, cv.height);
  drawTile(cx, model.attention(l, h), n, g.x0, g.y0, g.cell);
  cx.fillStyle = '#222'; cx.font = Math.max(8, g.cell - 3) + 'px monospace';
  for (let i = 0; i < n; i++) {
    cx.fillText(shown(S.chars[i]), g.x0 + i * g.cell + 1, g.y0 - 5);
    cx.fillText(shown(S.chars[i]), 4, g.y0 + (i + 1) * g.cell - 3);
  }
  const t = chosen();
  cx.strokeStyle = '#f40'; cx.lineWidth = 2; cx.strokeRect(g.x0, g.y0 + t * g.cell, n * g.cell, g.cell);
  cv.title = title;
}

function drawHead() {
  $('headtitle').textContent = 'layer ' + S.layer + ' head ' + S.head + (S.off[S.layer * NH + S.head] ? ' (off)' : '') +
    ' \u2014 row: the character looking (query), column: the character looked at (key)';
  drawHeadOn('head', main, S.layer, S.head, '');
  $('head2').hidden = !S.compare;
  if (S.compare) drawHeadOn('head2', second, S.compareLayer, S.compareHead,
                            'layer ' + S.compareLayer + ' head ' + S.compareHead + ', ' + modelLabel(S.compareModel));
}

function readout(id, model, l, h, e) {
  const g = headGeometry(), r = e.target.getBoundingClientRect(), n = S.ids.length;
  const j = Math.floor((e.clientX - r.left - g.x0) / g.cell), i = Math.floor((e.clientY - r.top - g.y0) / g.cell);
  if (i < 0 || j < 0 || i >= n || j >= n) return;
  const box = $('readout');
  if (j > i) { box.textContent = 'query ' + i + ' \u2018' + shown(S.chars[i]) + '\u2019 cannot see key ' + j + ' (the future)'; return; }
  const w = model.attention(l, h)[i * n + j];
  Object.assign(box.dataset, {layer: l, head: h, q: i, k: j, weight: w.toFixed(6)});
  box.textContent = 'layer ' + l + ' head ' + h + ': query \u2018' + shown(S.chars[i]) + '\u2019 (' + i + ') \u2192 key \u2018' +
                    shown(S.chars[j]) + '\u2019 (' + j + '): weight ' + w.toFixed(6);
}
$('head').addEventListener('mousemove', e => readout('head', main, S.layer, S.head, e));
$('head2').addEventListener('mousemove', e => readout('head2', second, S.compareLayer, S.compareHead, e));
$('head').addEventListener('click', e => {
  const g = headGeometry(), r = e.target.getBoundingClientRect(), i = Math.floor((e.clientY - r.top - g.y0) / g.cell);
  if (i >= 0 && i < S.ids.length) { S.pos = i; redraw(); }
});

// The next character at the chosen position: the ten most likely.
function drawNext() {
  const t = chosen(), p = main.probs(t), top = Array.from(p.keys()).sort((a, b) => p[b] - p[a] || a - b).slice(0, 10);
  const next = t + 1 < S.ids.length ? S.ids[t + 1] : -1;
  $('nexttitle').textContent = 'next character after position ' + t + ' \u2018' + shown(S.chars[t]) + '\u2019' +
    (next >= 0 ? ' (the text has \u2018' + shown(D.vocab[next]) + '\u2019: ' + p[next].toFixed(4) + ')' : '');
  const table = $('next');
  table.textContent = '';
  top.forEach(id => {
    const row = el('tr', {'data-id': id, 'data-prob': p[id].toFixed(6)});
    row.appendChild(el('td', {}, shown(D.vocab[id])));
    const bar = el('td', {style: 'text-align:left;width:160px'});
    bar.appendChild(el('span', {class: 'bar', style: 'width:' + Math.round(150 * p[id]) + 'px'}));
    row.appendChild(bar);
    row.appendChild(el('td', {}, p[id].toFixed(4)));
    if (id === next) row.style.fontWeight = 'bold';
    table.appendChild(row);
  });
}

function drawLens() {
  const t = chosen(), table = $('lens'), hasNext = t + 1 < S.ids.length;
  table.innerHTML = '<tr><th>after</th><th>top</th><th>p(top)</th>' + (hasNext ? '<th>p(true next)</th>' : '') + '</tr>';
  for (let d = 0; d <= L; d++) {
    const [top, p, pNext] = main.lens(d, t), row = el('tr', {'data-depth': d, 'data-top': top});
    row.appendChild(el('td', {}, d ? 'block ' + (d - 1) : 'embedding'));
    row.appendChild(el('td', {}, shown(D.vocab[top])));
    row.appendChild(el('td', {}, p.toFixed(4)));
    if (hasNext) row.appendChild(el('td', {}, pNext.toFixed(4)));
    table.appendChild(row);
  }
}

// One head at the chosen query: q.k/sqrt(hs) for every key, the softmax (at
// the slider's temperature, beside the model's own weights), the values and
// their weighted sum.
function vectorStrip(v, scale) {
  const cv = el('canvas', {width: v.length * 3, height: 10, class: 'vec'}), cx = cv.getContext('2d');
  v.forEach((x, d) => {
    const t = Math.max(-1, Math.min(1, x / scale));
    cx.fillStyle = t >= 0 ? 'rgba(178,24,43,' + t + ')' : 'rgba(33,102,172,' + -t + ')';
    cx.fillRect(3 * d, 0, 3, 10);
  });
  return cv;
}

function softmax(scores, temperature) {
  const top = Math.max(...scores), e = scores.map(s => Math.exp((s - top) / temperature));
  const sum = e.reduce((a, b) => a + b, 0);
  return e.map(x => x / sum);
}

function drawArithmetic() {
  const t = chosen(), a = main.arithmetic(S.layer, S.head, t), tau = S.temperature;
  const w = softmax(Array.from(a.scores), tau);
  const mixed = new Float32Array(hs);
  w.forEach((x, j) => { for (let d = 0; d < hs; d++) mixed[d] += x * a.values[j * hs + d]; });
  let scale = 1e-6;
  a.values.forEach(x => { scale = Math.max(scale, Math.abs(x)); });
  $('arithtitle').textContent = 'layer ' + S.layer + ' head ' + S.head + ' at query ' + t + ' \u2018' + shown(S.chars[t]) + '\u2019';
  const box = $('arith');
  box.textContent = '';
  const table = el('table', {id: 'arithtable'});
  table.innerHTML = '<tr><th>key</th><th>q\u00b7k/\u221a' + hs + '</th><th>softmax at ' + tau.toFixed(2) +
                    '</th><th>the model\u2019s weight</th><th>value v (blue \u2212, red +)</th></tr>';
  for (let j = 0; j <= t; j++) {
    const row = el('tr', {'data-key': j, 'data-score': a.scores[j].toFixed(6), 'data-weight': a.weights[j].toFixed(6)});
    row.appendChild(el('td', {}, j + ' \u2018' + shown(S.chars[j]) + '\u2019'));
    row.appendChild(el('td', {}, a.scores[j].toFixed(3)));
    const bar = el('td', {style: 'text-align:left'});
    bar.appendChild(el('span', {class: 'bar', style: 'width:' + Math.round(80 * w[j]) + 'px'}));
    bar.appendChild(document.createTextNode(' ' + w[j].toFixed(3)));
    row.appendChild(bar);
    row.appendChild(el('td', {}, a.weights[j].toFixed(3)));
    const v = el('td', {});
    v.appendChild(vectorStrip(Array.from(a.values.slice(j * hs, (j + 1) * hs)), scale));
    row.appendChild(v);
    table.appendChild(row);
  }
  const sum = el('tr');
  sum.appendChild(el('td', {colspan: 4, style: 'text-align:left'}, '\u03a3 softmax \u00d7 v: the head\u2019s output' +
                     (Math.abs(tau - 1) > 1e-9 ? ' at this temperature (the model\u2019s, at 1, below)' : '')));
  const out = el('td', {});
  out.appendChild(vectorStrip(Array.from(mixed), scale));
  sum.appendChild(out);
  table.appendChild(sum);
  if (Math.abs(tau - 1) > 1e-9) {
    const model = el('tr');
    model.appendChild(el('td', {colspan: 4, style: 'text-align:left'}, 'the model\u2019s output (temperature 1)'));
    const o = el('td', {});
    o.appendChild(vectorStrip(Array.from(a.out), scale));
    model.appendChild(o);
    table.appendChild(model);
  }
  box.appendChild(table);
}

$('temp').addEventListener('input', () => {
  S.temperature = Math.pow(2, +$('temp').value);
  $('tempvalue').textContent = S.temperature.toFixed(2);
  if (S.ids.length) drawArithmetic();
});

function drawScores() {
  const table = $('scores'), weights = D.models[S.model].weightScores;
  let s = '<tr><th>layer</th><th>head</th>' + D.scoreTags.map((tag, k) => '<th title="' + D.scoreNames[k] + '">' + tag + '</th>').join('') + '<th>type</th></tr>';
  for (let h = 0; h < L * NH; h++) {
    const sc = main.scores(h), type = main.headType(h);
    const w = weights[h]; // copying, its random value, K-composition, its random value
    sc[ATTENTION_SCORES] = [w[0], w[1]];
    sc[ATTENTION_SCORES + 1] = [w[2], w[3]];
    s += '<tr data-head="' + h + '"' + (h === S.layer * NH + S.head ? ' class="cur"' : '') + '><td>' + Math.floor(h / NH) + '</td><td>' + h % NH + '</td>';
    sc.forEach(([v, u], k) => {
      const digits = k === 6 ? 2 : 3;
      s += '<td data-score="' + D.scoreNames[k] + '" data-value="' + (v === null || Number.isNaN(v) ? '' : v.toFixed(6)) + '">' +
           (v === null || Number.isNaN(v) ? '-' : v.toFixed(digits) + ' <span class="u">' + (u === null || Number.isNaN(u) ? '' : u.toFixed(digits)) + '</span>') + '</td>';
    });
    s += '<td>' + (type >= 0 ? D.scoreTags[type] : '') + '</td></tr>';
  }
  table.innerHTML = s;
  table.querySelectorAll('tr[data-head]').forEach(r => { r.onclick = () => { const h = +r.dataset.head; selectHead(Math.floor(h / NH), h % NH); }; });
}

// The units as a grid: a row a layer, its heads then its attention and MLP.
function drawAblation() {
  const table = $('ablation');
  let s = '<tr><th>layer</th>' + Array.from({length: NH}, (_, h) => '<th>head ' + h + '</th>').join('') + '<th>attention</th><th>MLP</th></tr>';
  for (let l = 0; l < L; l++) {
    s += '<tr><td>' + l + '</td>';
    const units = Array.from({length: NH}, (_, h) => l * NH + h).concat([L * NH + 2 * l, L * NH + 2 * l + 1]);
    units.forEach(u => { s += '<td data-unit="' + u + '" class="' + (S.off[u] ? 'off' : '') + '" title="' + unitLabel(u) + '">' + (S.off[u] ? 'off' : 'on') + '</td>'; });
    s += '</tr>';
  }
  table.innerHTML = s;
  table.querySelectorAll('td[data-unit]').forEach(c => { c.onclick = () => { const u = +c.dataset.unit; S.off[u] ^= 1; run(); }; });
  const off = Array.from(S.off.keys()).filter(u => S.off[u]).map(unitLabel);
  $('ablationnote').textContent = off.length ? 'off: ' + off.join(', ') : '';
}
$('kind').addEventListener('change', () => { S.kind = +$('kind').value; run(); });
$('restore').addEventListener('click', () => { S.off.fill(0); run(); });

// ---- the snapshots: the slider replays the text through each

function setModel(k) {
  S.model = k;
  $('step').value = order.indexOf(k);
  $('steplabel').textContent = modelLabel(k) + ' (' + (order.indexOf(k) + 1) + ' of ' + order.length + ')';
  run();
}
let playing = null;
function play() {
  if (playing) { clearInterval(playing); playing = null; $('play').textContent = 'play'; return; }
  $('play').textContent = 'pause';
  if (order.indexOf(S.model) === order.length - 1) setModel(order[0]);
  playing = setInterval(() => {
    const i = order.indexOf(S.model) + 1;
    if (i >= order.length) { play(); return; }
    setModel(order[i]);
  }, 700);
}

// ---- writing: bin/sample's loop, a character at a time

function write() {
  if (!S.ids.length) { S.ids = [idOf.has(10) ? idOf.get(10) : 0]; }
  const count = Math.max(1, Math.min(10000, +$('count').value | 0));
  const temperature = Math.max(0, +$('wtemp').value), topK = Math.max(0, +$('topk').value | 0);
  const topP = Math.min(1, Math.max(1e-6, +$('topp').value)), seed = Math.max(0, Math.floor(+$('seed').value));
  main.load(S.model);
  main.setTokens(S.ids);
  let id = wasm.page_sample_begin(main.ptr, S.ids.length, temperature, topK, topP, seed);
  let written = 0;
  S.writing = true;
  $('write').disabled = true; $('stop').disabled = false; $('step').disabled = true;
  const step = () => {
    if (!S.writing) return;
    $('text').value += String.fromCodePoint(D.vocab[id]);
    written++;
    S.pos = -1;
    run();
    if (written >= count) { stopWriting(); return; }
    id = wasm.page_sample_next(main.ptr, id);
    setTimeout(step, 0);
  };
  step();
}
function stopWriting() {
  S.writing = false;
  $('write').disabled = false; $('stop').disabled = true; $('step').disabled = false;
  document.body.dataset.written = $('text').value.length;
}
$('write').addEventListener('click', write);
$('stop').addEventListener('click', stopWriting);

// ---- what tests and the curious read: the numbers, not the pixels

window.explorer = {
  config: cfg, models: D.models,
  ids: () => { flush(); return S.ids.slice(); },
  attention: (l, h) => { flush(); return Array.from(main.attention(l, h)); },
  loss: () => { flush(); return +$('lossline').dataset.loss; },
  cleanLoss: () => { flush(); return +$('lossline').dataset.cleanLoss; },
  probs: t => { flush(); return Array.from(main.probs(t)); },
  // ms of the forward alone over the text, the median of `reps`
  timeForward(reps) {
    main.setTokens(S.ids);
    const ms = [];
    for (let r = 0; r < reps; r++) { const t0 = performance.now(); wasm.page_forward(main.ptr, S.ids.length); ms.push(performance.now() - t0); }
    run();
    return ms.sort((a, b) => a - b)[Math.floor(reps / 2)];
  },
  // ms a sampled character (no drawing), from the text, over `count` characters
  timeSampling(count) {
    main.setTokens(S.ids);
    const t0 = performance.now();
    let id = wasm.page_sample_begin(main.ptr, S.ids.length, 0.8, 0, 1, 1337);
    for (let i = 1; i < count; i++) id = wasm.page_sample_next(main.ptr, id);
    return (performance.now() - t0) / count;
  },
};

// ---- start

function card() {
  const parts = [L + ' layers \u00d7 ' + NH + ' heads, width ' + C, 'context ' + T, V + ' characters',
    (cfg.params / 1e6).toFixed(2) + ' M parameters', D.block];
  $('card').textContent = D.checkpoint + ': ' + parts.join(', ');
}

async function start() {
  card();
  (function () {
    const cx = $('scalebar').getContext('2d');
    for (let k = 0; k < 160; k++) { cx.fillStyle = color(k / 159); cx.fillRect(k, 0, 1, 10); }
  })();
  const module = await WebAssembly.compile(bytesOf($('module').textContent));
  const instance = await WebAssembly.instantiate(module, {wasi_snapshot_preview1: wasiImports()});
  wasm = instance.exports;
  wasm._initialize();
  main = new PageModel();
  for (let l = 0; l < L; l++) for (let h = 0; h < NH; h++) $('comparehead').add(new Option('layer ' + l + ' head ' + h, l * NH + h));
  order.forEach(k => $('comparemodel').add(new Option(modelLabel(k), k)));
  $('comparemodel').value = 0;
  if (order.length > 1) {
    $('timeline').hidden = false;
    $('step').max = order.length - 1;
    $('step').addEventListener('input', () => setModel(order[+$('step').value]));
    $('play').addEventListener('click', play);
  }
  const compare = () => {
    S.compare = $('compare').checked;
    const h = +$('comparehead').value;
    S.compareLayer = Math.floor(h / NH); S.compareHead = h % NH; S.compareModel = +$('comparemodel').value;
    run();
  };
  ['compare', 'comparehead', 'comparemodel'].forEach(id => $(id).addEventListener('change', compare));
  $('text').addEventListener('input', () => { S.pos = -2; schedule(); });
  ['click', 'keyup'].forEach(ev => $('text').addEventListener(ev, () => {   // the caret moved
    if (pending) { S.pos = -2; return; }
    const p = caretPosition();
    if (S.ids.length && (p < 0 ? S.ids.length - 1 : p) !== chosen()) { S.pos = p; redraw(); }
  }));
  $('text').value = String.fromCodePoint(...D.text);
  if (!D.text.length) {   // no text given: a line the model writes itself, greedily
    main.load(0);
    const start = idOf.has(10) ? idOf.get(10) : 0;
    main.setTokens([start]);
    let id = wasm.page_sample_begin(main.ptr, 1, 0, 0, 1, 1337), line = '';
    for (let i = 0; i < Math.min(64, T); i++) { line += String.fromCodePoint(D.vocab[id]); id = wasm.page_sample_next(main.ptr, id); }
    $('text').value = line;
  }
  setModel(0);
  $('status').textContent = '';
  document.body.dataset.resources = performance.getEntriesByType('resource').length;
  document.body.dataset.ready = '1';
}

start().catch(e => {
  $('status').textContent = 'the model could not start: ' + e.message;
  document.body.dataset.error = e.message;
});
