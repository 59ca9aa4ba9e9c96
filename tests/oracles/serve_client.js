// Drives `oneinfer serve` with the official OpenAI client (openai@6.49.0): the replies the
// acceptance of issue 13 names, checked against `oneinfer run --chat --prompt` greedy output.
// usage: node serve_client.js BASE_URL API_KEY EXPECTED.json
//   EXPECTED.json: {"prompt": user text, "max_tokens": N, "text": what `oneinfer run --chat` printed}
// Prints one line per check; exits 1 on the first mismatch.
const OpenAI = require('openai');
const fs = require('fs');

const [baseURL, apiKey, expectedPath] = process.argv.slice(2);
const expected = JSON.parse(fs.readFileSync(expectedPath, 'utf8'));
const client = new OpenAI({baseURL: baseURL + '/v1', apiKey, maxRetries: 0, timeout: 120000});

function check(ok, what, detail) {
  if (!ok) {
    console.error(`serve_client: FAILED: ${what}${detail ? '\n' + detail : ''}`);
    process.exit(1);
  }
  console.log(`serve_client: ok: ${what}`);
}

async function whole(params) {
  const r = await client.chat.completions.create({...params, stream: false});
  return {text: r.choices[0].message.content, finish: r.choices[0].finish_reason, usage: r.usage};
}

async function streamed(params, abortAfter = 0) {
  const stream = await client.chat.completions.create({...params, stream: true, stream_options: {include_usage: true}});
  let text = '', finish = null, usage = null, chunks = 0;
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      if (c.delta && c.delta.content) text += c.delta.content;
      if (c.finish_reason) finish = c.finish_reason;
    }
    if (chunk.usage) usage = chunk.usage;
    if (abortAfter && ++chunks >= abortAfter) {
      stream.controller.abort();  // the client hangs up mid-stream
      return {text, finish: 'aborted', usage};
    }
  }
  return {text, finish, usage};
}

(async () => {
  const models = await client.models.list();
  check(models.data.length === 1 && typeof models.data[0].id === 'string', `models.list: ${models.data[0].id}`);
  const model = models.data[0].id;
  const greedy = {model, messages: [{role: 'user', content: expected.prompt}], temperature: 0, max_tokens: expected.max_tokens};

  // Non-streamed == streamed == `oneinfer run --chat --prompt`.
  const a = await whole(greedy);
  check(a.text === expected.text, 'non-streamed reply equals oneinfer run --chat', `got  ${JSON.stringify(a.text)}\nwant ${JSON.stringify(expected.text)}`);
  check(a.usage.completion_tokens <= expected.max_tokens && a.usage.prompt_tokens > 0 &&
        a.usage.total_tokens === a.usage.prompt_tokens + a.usage.completion_tokens, `usage ${JSON.stringify(a.usage)}`);
  const b = await streamed(greedy);
  check(b.text === a.text && b.finish === a.finish, `streamed reply equals the non-streamed one (finish_reason ${b.finish})`,
        `got  ${JSON.stringify(b.text)}\nwant ${JSON.stringify(a.text)}`);
  check(b.usage && b.usage.completion_tokens === a.usage.completion_tokens, 'stream_options.include_usage sends the usage');
  const c = await client.chat.completions.create({...greedy, max_completion_tokens: 3, max_tokens: undefined});
  check(c.choices[0].finish_reason === 'length' && c.usage.completion_tokens === 3, 'max_completion_tokens 3 -> finish_reason length');

  // 8 concurrent streams (greedy and seeded sampling, different prompts and lengths) each equal
  // the same request run alone.
  const requests = [];
  for (let i = 0; i < 8; ++i) {
    const r = {model, messages: [{role: 'user', content: `${expected.prompt} (variant ${i}: ${'more '.repeat(i)})`}],
               max_tokens: 8 + 3 * i, temperature: 0};
    if (i % 2) Object.assign(r, {temperature: 0.8, top_p: 0.9, seed: 1000 + i});
    requests.push(r);
  }
  const alone = [];
  for (const r of requests) alone.push(await streamed(r));
  const together = await Promise.all(requests.map((r) => streamed(r)));
  for (let i = 0; i < requests.length; ++i) {
    check(together[i].text === alone[i].text && together[i].finish === alone[i].finish,
          `concurrent stream ${i} equals the same request alone (${together[i].usage.completion_tokens} tokens)`,
          `together ${JSON.stringify(together[i].text)}\nalone    ${JSON.stringify(alone[i].text)}`);
  }

  // /v1/completions: text and token-id prompts.
  const comp = await client.completions.create({model, prompt: 'Once upon a time', max_tokens: 6, temperature: 0});
  check(comp.choices[0].text.length > 0 && comp.usage.completion_tokens === 6, 'completions with a text prompt');
  const ids = await client.completions.create({model, prompt: [9707, 11, 847], max_tokens: 4, temperature: 0});
  check(ids.usage.prompt_tokens === 3 && ids.usage.completion_tokens === 4, 'completions with token ids');

  // Stop strings: the reply ends right before the first occurrence.
  const full = a.text;
  const stop = full.slice(Math.floor(full.length / 2), Math.floor(full.length / 2) + 2);
  const cut = full.slice(0, full.indexOf(stop));
  const s1 = await whole({...greedy, stop: [stop]});
  check(s1.text === cut && s1.finish === 'stop', `stop ${JSON.stringify(stop)} cuts the reply (non-streamed)`);
  const s2 = await streamed({...greedy, stop});
  check(s2.text === cut && s2.finish === 'stop', 'stop cuts the streamed reply too');

  // Errors come back as the client's typed errors.
  try {
    await client.chat.completions.create({model, messages: [], max_tokens: 1});
    check(false, 'empty messages refused');
  } catch (e) {
    check(e instanceof OpenAI.BadRequestError && e.status === 400, `empty messages -> 400 (${e.message})`);
  }
  const noKey = new OpenAI({baseURL: baseURL + '/v1', apiKey: 'wrong-key', maxRetries: 0});
  try {
    await noKey.models.list();
    check(false, 'wrong key refused');
  } catch (e) {
    check(e instanceof OpenAI.AuthenticationError && e.status === 401, 'wrong API key -> 401');
  }

  // 200 requests from 16 clients, a third of them hanging up mid-stream.
  let next = 0, aborted = 0, done = 0;
  const worker = async (w) => {
    while (next < 200) {
      const i = next++;
      const r = {model, messages: [{role: 'user', content: `request ${i} from client ${w}`}], max_tokens: 4 + (i % 13), temperature: 0};
      const res = await streamed(r, i % 3 === 0 ? 1 + (i % 4) : 0);
      if (res.finish === 'aborted') ++aborted; else ++done;
    }
  };
  await Promise.all(Array.from({length: 16}, (_, w) => worker(w)));
  check(done + aborted === 200, `200 requests from 16 clients: ${done} finished, ${aborted} hung up mid-stream`);
})().catch((e) => {
  console.error('serve_client: FAILED:', e && e.stack || e);
  process.exit(1);
});
