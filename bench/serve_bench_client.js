// Load for `oneinfer serve`: C concurrent clients, each sending R streaming chat requests of N
// new tokens one after another (greedy, distinct prompts). Prints one JSON line: the aggregate
// generated tokens per second over the wall time, and the time to first token of every request.
// usage: node bench/serve_bench_client.js BASE_URL CLIENTS NEW_TOKENS [REQUESTS_PER_CLIENT]
// Plain fetch (Node 20), so it runs without the test oracles installed.
const [baseURL, clientsArg, tokensArg, perClientArg] = process.argv.slice(2);
const clients = Number(clientsArg), newTokens = Number(tokensArg), perClient = Number(perClientArg || 2);

async function one(prompt) {
  const start = performance.now();
  const res = await fetch(`${baseURL}/v1/chat/completions`, {
    method: 'POST', headers: {'Content-Type': 'application/json'},
    body: JSON.stringify({messages: [{role: 'user', content: prompt}], max_tokens: newTokens, temperature: 0,
                          stream: true, stream_options: {include_usage: true}}),
  });
  if (!res.ok) throw new Error(`${res.status} ${await res.text()}`);
  const decoder = new TextDecoder();
  let buffer = '', ttft = null, tokens = 0;
  for await (const bytes of res.body) {
    buffer += decoder.decode(bytes, {stream: true});
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const data = buffer.slice(6, end);
      buffer = buffer.slice(end + 2);
      if (data === '[DONE]') continue;
      const chunk = JSON.parse(data);
      if (ttft === null && chunk.choices.length && chunk.choices[0].delta.content) ttft = performance.now() - start;
      if (chunk.usage) tokens = chunk.usage.completion_tokens;
    }
  }
  return {ttft, tokens};
}

(async () => {
  const start = performance.now();
  const results = await Promise.all(Array.from({length: clients}, async (_, c) => {
    const mine = [];
    for (let r = 0; r < perClient; ++r) mine.push(await one(`Client ${c}, request ${r}: tell me about the weather.`));
    return mine;
  }));
  const seconds = (performance.now() - start) / 1000;
  const all = results.flat();
  const tokens = all.reduce((a, r) => a + r.tokens, 0);
  const ttft = all.map((r) => r.ttft).sort((a, b) => a - b);
  console.log(JSON.stringify({clients, requests: all.length, tokens, seconds, tokens_per_s: tokens / seconds,
                              ttft_median_ms: ttft[Math.floor(ttft.length / 2)], ttft_max_ms: ttft[ttft.length - 1]}));
})().catch((e) => { console.error(e); process.exit(1); });
