// The chat page of `oneinfer serve` in a real browser: Debian's chromium, headless, driven by
// puppeteer-core@24.43.1. Opens the page with the key in the URL fragment, sets temperature 0,
// types the prompt, presses Enter, waits for the streamed reply, and checks it is the text
// `oneinfer run --chat` printed; Shift+Enter must add a line, not send.
// usage: node serve_browser.js BASE_URL API_KEY EXPECTED.json [SCREENSHOT.png]
const puppeteer = require('puppeteer-core');
const fs = require('fs');

const [baseURL, apiKey, expectedPath, screenshot] = process.argv.slice(2);
const expected = JSON.parse(fs.readFileSync(expectedPath, 'utf8'));

function check(ok, what, detail) {
  if (!ok) throw new Error(`${what}${detail ? '\n' + detail : ''}`);
  console.log(`serve_browser: ok: ${what}`);
}

(async () => {
  const browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  try {
    const page = await browser.newPage();
    await page.setViewport({width: 900, height: 640});
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(`${baseURL}/#key=${encodeURIComponent(apiKey)}`, {waitUntil: 'networkidle0'});
    check(await page.evaluate(() => localStorage.getItem('oneinfer.apiKey')) === apiKey &&
          await page.evaluate(() => location.hash) === '' && await page.$eval('#api-key', (el) => el.value) === apiKey,
          'the #key= fragment is kept in local storage and removed from the address');
    await page.$eval('#temperature', (el) => { el.value = '0'; el.dispatchEvent(new Event('change')); });
    await page.$eval('#max-tokens', (el, n) => { el.value = String(n); el.dispatchEvent(new Event('change')); }, expected.max_tokens);

    // Shift+Enter is a new line in the box, not a send.
    await page.focus('#input');
    await page.keyboard.type('draft');
    await page.keyboard.down('Shift');
    await page.keyboard.press('Enter');
    await page.keyboard.up('Shift');
    check(await page.$eval('#input', (el) => el.value) === 'draft\n' && (await page.$$('.msg.user')).length === 0,
          'Shift+Enter adds a line without sending');
    await page.$eval('#input', (el) => { el.value = ''; });

    await page.keyboard.type(expected.prompt);
    await page.keyboard.press('Enter');
    await page.waitForSelector('.msg.assistant.done', {timeout: 60000});
    const reply = await page.$eval('.msg.assistant.done', (el) => el.firstChild ? el.firstChild.textContent : '');
    check(reply === expected.text, 'the streamed reply on the page equals oneinfer run --chat',
          `got  ${JSON.stringify(reply)}\nwant ${JSON.stringify(expected.text)}`);
    check(await page.$eval('.msg.user', (el) => el.textContent) === expected.prompt, 'the message shows as a user turn');
    check(await page.$eval('#stop', (el) => el.disabled) && !(await page.$eval('#send', (el) => el.disabled)),
          'Send is enabled and Stop disabled once the reply ends');
    if (screenshot) {
      await page.screenshot({path: screenshot});
      console.log(`serve_browser: screenshot ${screenshot}`);
    }

    // The stop button ends a long reply early. The tiny model writes its whole reply in under a
    // second, so the download is throttled (4 KB/s, ~25 s for the reply) to make the click land
    // mid-stream on a loaded machine too (it once lost the race in CI and saw "length").
    await page.emulateNetworkConditions({download: 4096, upload: 1 << 20, latency: 0});
    await page.$eval('#max-tokens', (el) => { el.value = '100000'; el.dispatchEvent(new Event('change')); });
    await page.keyboard.type('Tell me a long story');
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => document.querySelectorAll('.msg.assistant')[1].textContent.length > 0, {timeout: 60000});
    await page.click('#stop');
    await page.waitForSelector('.msg.assistant.done + .msg.user + .msg.assistant.done', {timeout: 30000});
    const meta = await page.$eval('.msg.user + .msg.assistant.done:last-child .meta', (el) => el.textContent);
    check(meta === 'stopped', 'the Stop button ends a streaming reply', `the reply ended with "${meta}"`);
    check(errors.length === 0, 'no script errors on the page', errors.join('\n'));
  } finally {
    await browser.close();
  }
})().catch((e) => {
  console.error('serve_browser: FAILED:', e && e.stack || e);
  process.exit(1);
});
