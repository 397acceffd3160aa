// page_driver.mjs: drives bin/explore's page in a real browser as a user
// would (typing, clicking), and prints what the page then shows as one JSON
// object on stdout, for tests/test_explore.c to check against bin/attn and
// bin/sample. puppeteer-core (npm) drives Debian's Chromium or Firefox ESR;
// no browser is downloaded.
//
//   node tests/page_driver.mjs --browser chromium|firefox --page FILE --text TEXT
//        [--ablate UNIT --kind 1|2] [--write N --temperature T --seed S]
//        [--paste] [--snapshots] [--time] [--screenshot FILE]
//   node tests/page_driver.mjs --explorer --page FILE   (bin/attn --html's page)
//
// --paste puts the text in at once (one input event) instead of typing it.
//
// Output: {ready, resources, error, n, ids, attention: [L*NH arrays of n*n],
// loss, cleanLoss, ablated: {loss, cleanLoss}, written: text, snapshots:
// [{step, loss}], forwardMs, sampleMs, openMs}.
import {createRequire} from 'node:module';
import {mkdtempSync, rmSync} from 'node:fs';
import {tmpdir} from 'node:os';
import {join, resolve} from 'node:path';
import {fileURLToPath} from 'node:url';

// puppeteer-core from the checkout's build-node/ (.ci/run installs it there)
const require = createRequire(fileURLToPath(new URL('../build-node/', import.meta.url)));
const puppeteer = require('puppeteer-core');

function args() {
  const a = {browser: 'chromium', kind: 1};
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i].replace(/^--/, '');
    if (['time', 'snapshots', 'paste', 'explorer'].includes(k)) a[k] = true;
    else a[k] = argv[++i];
  }
  return a;
}

async function launch(browser) {
  const profile = mkdtempSync(join(tmpdir(), 'page-driver-'));
  if (browser === 'firefox') {
    const b = await puppeteer.launch({browser: 'firefox', executablePath: '/usr/bin/firefox-esr',
                                      headless: true, userDataDir: profile});
    return {b, profile};
  }
  const b = await puppeteer.launch({
    executablePath: '/usr/bin/chromium', headless: true, userDataDir: profile,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
           '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
  });
  return {b, profile};
}

const a = args();
const {b, profile} = await launch(a.browser);
const out = {};
try {
  const page = await b.newPage();
  await page.setViewport({width: 1400, height: 900});
  const requests = [];
  page.on('request', r => { if (!r.url().startsWith('file:') && !r.url().startsWith('data:')) requests.push(r.url()); });
  const t0 = Date.now();
  await page.goto('file://' + resolve(a.page));
  await page.waitForFunction(() => document.body.dataset.ready === '1' || document.body.dataset.error, {timeout: 120000});
  out.openMs = Date.now() - t0;
  out.error = await page.evaluate(() => document.body.dataset.error || null);
  if (out.error) throw new Error(out.error);
  if (a.explorer) {   // bin/attn --html's explorer: the slider's ends, the bar's height, the titles' ink
    Object.assign(out, await page.evaluate(() => {
      const st = document.getElementById('step'), bar = document.getElementById('bar'), heights = [], labels = [];
      for (let i = 0; i <= +st.max; i++) {
        st.value = i; st.dispatchEvent(new Event('input'));
        heights.push(bar.offsetHeight); labels.push(document.getElementById('steplabel').textContent);
      }
      // the overview's column titles, "head h" above each tile: the colours of their ink
      const cv = document.getElementById('canvas'), cx = cv.getContext('2d'), D = JSON.parse(document.getElementById('data').textContent);
      const T = D.views[0].T, t = Math.max(2, Math.floor(160 / T)), tile = t * T + 12, ink = [];
      for (let h = 0; h < D.heads; h++) {
        const img = cx.getImageData(60 + h * tile, 4, 40, 14).data;
        for (let k = 0; k < img.length; k += 4) if (img[k] < 200 || img[k + 1] < 200 || img[k + 2] < 200) ink.push([h, img[k], img[k + 1], img[k + 2]]);
      }
      return {heights, labels, titleInk: ink};
    }));
  } else {
    // type the text, as a user does
    await page.click('#text');
    await page.evaluate(() => { const t = document.getElementById('text'); t.value = ''; t.dispatchEvent(new Event('input')); });
    if (a.text && a.paste) {    // all at once, as a paste: one input event
      await page.evaluate(text => { const t = document.getElementById('text'); t.value = text; t.dispatchEvent(new Event('input')); }, a.text);
    } else if (a.text) await page.type('#text', a.text);
    if (a.ablate !== undefined) {
      await page.select('#kind', String(a.kind));
      await page.click('td[data-unit="' + a.ablate + '"]');
      out.ablated = await page.evaluate(() => ({loss: explorer.loss(), cleanLoss: explorer.cleanLoss()}));
      await page.click('#restore');
    }
    Object.assign(out, await page.evaluate(() => {
      const c = explorer.config, att = [];
      for (let l = 0; l < c.layers; l++) for (let h = 0; h < c.heads; h++) att.push(explorer.attention(l, h));
      return {ready: document.body.dataset.ready, resources: +document.body.dataset.resources, n: explorer.ids().length,
              ids: explorer.ids(), attention: att, loss: explorer.loss(), cleanLoss: explorer.cleanLoss(),
              textnote: document.getElementById('textnote').textContent};
    }));
    if (a.snapshots) {
      out.snapshots = [];
      const count = await page.evaluate(() => explorer.models.length);
      for (let i = 0; i < count; i++) {
        await page.evaluate(i => { const s = document.getElementById('step'); s.value = i; s.dispatchEvent(new Event('input')); }, i);
        out.snapshots.push(await page.evaluate(() => ({label: document.getElementById('steplabel').textContent, loss: explorer.loss()})));
      }
    }
    if (a.time) {
      out.forwardMs = await page.evaluate(() => explorer.timeForward(21));
      out.sampleMs = await page.evaluate(() => explorer.timeSampling(200));
    }
    if (a.write) {
      await page.evaluate(() => { document.getElementById('text').value = ''; });
      await page.click('#text');
      await page.evaluate(() => { const t = document.getElementById('text'); t.value = ''; t.dispatchEvent(new Event('input')); });
      if (a.prompt) await page.type('#text', a.prompt);
      for (const [id, v] of [['count', a.write], ['wtemp', a.temperature || '0'], ['seed', a.seed || '1337']]) {
        await page.evaluate((id, v) => { document.getElementById(id).value = v; }, id, v);
      }
      await page.evaluate(() => { delete document.body.dataset.written; });
      await page.click('#write');
      await page.waitForFunction(() => document.body.dataset.written !== undefined, {timeout: 300000});
      out.written = await page.evaluate(() => document.getElementById('text').value);
    }
    if (a.screenshot) await page.screenshot({path: a.screenshot, fullPage: true});
  }
  out.requests = requests;
} catch (e) {
  out.error = String(e && e.message || e);
} finally {
  await b.close();
  rmSync(profile, {recursive: true, force: true});
}
process.stdout.write(JSON.stringify(out) + '\n');
