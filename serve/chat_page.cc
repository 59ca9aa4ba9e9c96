// The chat page: a conversation with the served model over POST /v1/chat/completions (streamed).
// Plain HTML, CSS and JavaScript in one string, so the binary needs no files and no network.
#include "serve/chat_page.h"

namespace oneinfer::serve {

const char kChatPageHtml[] = R"PAGE(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>oneinfer chat</title>
<style>
  :root { --bg: #f6f7f9; --fg: #1d2430; --muted: #6b7382; --accent: #2b6cb0; --user: #dbe8f7; --bot: #ffffff; }
  * { box-sizing: border-box; }
  body { margin: 0; font: 15px/1.5 system-ui, sans-serif; background: var(--bg); color: var(--fg);
         display: flex; flex-direction: column; height: 100vh; }
  header { display: flex; align-items: center; gap: 12px; padding: 8px 16px; border-bottom: 1px solid #dde1e7;
           background: #fff; flex-wrap: wrap; }
  header h1 { font-size: 16px; margin: 0 12px 0 0; }
  header label { color: var(--muted); font-size: 13px; display: flex; align-items: center; gap: 4px; }
  header input { width: 80px; padding: 2px 4px; }
  header input#api-key { width: 140px; }
  #messages { flex: 1; overflow-y: auto; padding: 16px; display: flex; flex-direction: column; gap: 10px; }
  .msg { max-width: 80%; padding: 8px 12px; border-radius: 10px; white-space: pre-wrap; word-wrap: break-word; }
  .msg.user { align-self: flex-end; background: var(--user); }
  .msg.assistant { align-self: flex-start; background: var(--bot); border: 1px solid #e3e6eb; }
  .msg.error { align-self: center; color: #a51d1d; background: #fde8e8; }
  .msg .meta { display: block; color: var(--muted); font-size: 12px; margin-top: 4px; }
  form { display: flex; gap: 8px; padding: 12px 16px; border-top: 1px solid #dde1e7; background: #fff; }
  textarea { flex: 1; resize: none; height: 3.2em; font: inherit; padding: 6px 8px; }
  button { font: inherit; padding: 0 16px; border: 0; border-radius: 6px; background: var(--accent); color: #fff; cursor: pointer; }
  button:disabled { opacity: .4; cursor: default; }
  button#stop { background: #a51d1d; }
</style>
</head>
<body>
<header>
  <h1>oneinfer chat</h1>
  <span id="model" class="meta"></span>
  <label>temperature <input id="temperature" type="number" min="0" max="2" step="0.1" value="0.7"></label>
  <label>max tokens <input id="max-tokens" type="number" min="1" step="1" value="256"></label>
  <label>API key <input id="api-key" type="password" autocomplete="off"></label>
  <button id="clear" type="button">New chat</button>
</header>
<main id="messages" aria-live="polite"></main>
<form id="composer">
  <textarea id="input" placeholder="Message (Enter sends, Shift+Enter for a new line)" autofocus></textarea>
  <button id="send" type="submit">Send</button>
  <button id="stop" type="button" disabled>Stop</button>
</form>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
const conversation = [];
let controller = null;

// The key: from the URL fragment (#key=...) once, then from local storage.
const fragment = new URLSearchParams(location.hash.slice(1));
if (fragment.get("key")) {
  localStorage.setItem("oneinfer.apiKey", fragment.get("key"));
  history.replaceState(null, "", location.pathname + location.search);
}
$("api-key").value = localStorage.getItem("oneinfer.apiKey") || "";
$("api-key").addEventListener("change", () => localStorage.setItem("oneinfer.apiKey", $("api-key").value));
for (const id of ["temperature", "max-tokens"]) {
  const saved = localStorage.getItem("oneinfer." + id);
  if (saved !== null) $(id).value = saved;
  $(id).addEventListener("change", () => localStorage.setItem("oneinfer." + id, $(id).value));
}

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = $("api-key").value.trim();
  if (key) h["Authorization"] = "Bearer " + key;
  return h;
}

function bubble(role, text) {
  const div = document.createElement("div");
  div.className = "msg " + role;
  div.textContent = text;
  $("messages").appendChild(div);
  div.scrollIntoView({ block: "end" });
  return div;
}

function busy(on) {
  $("send").disabled = on;
  $("stop").disabled = !on;
}

async function send() {
  const text = $("input").value;
  if (!text.trim() || controller) return;
  $("input").value = "";
  conversation.push({ role: "user", content: text });
  bubble("user", text);
  const reply = bubble("assistant", "");
  reply.classList.add("streaming");
  controller = new AbortController();
  busy(true);
  let content = "", finish = "";
  try {
    const res = await fetch("/v1/chat/completions", {
      method: "POST", headers: headers(), signal: controller.signal,
      body: JSON.stringify({
        messages: conversation, stream: true,
        temperature: Number($("temperature").value), max_tokens: Math.max(1, parseInt($("max-tokens").value, 10) || 1),
      }),
    });
    if (!res.ok) {
      let message = res.status + " " + res.statusText;
      try { message = (await res.json()).error.message; } catch (e) {}
      throw new Error(message);
    }
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const event = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        for (const line of event.split("\n")) {
          if (!line.startsWith("data: ")) continue;
          const data = line.slice(6);
          if (data === "[DONE]") continue;
          const chunk = JSON.parse(data);
          if (chunk.error) throw new Error(chunk.error.message);
          for (const choice of chunk.choices || []) {
            if (choice.delta && choice.delta.content) {
              content += choice.delta.content;
              reply.textContent = content;
              reply.scrollIntoView({ block: "end" });
            }
            if (choice.finish_reason) finish = choice.finish_reason;
          }
        }
      }
    }
  } catch (e) {
    if (e.name === "AbortError") finish = "stopped";
    else bubble("error", String(e.message || e));
  } finally {
    controller = null;
    busy(false);
    reply.classList.remove("streaming");
    reply.classList.add("done");
    if (finish) {
      const meta = document.createElement("span");
      meta.className = "meta";
      meta.textContent = finish;
      reply.appendChild(meta);
    }
    conversation.push({ role: "assistant", content });
    $("input").focus();
  }
}

$("composer").addEventListener("submit", (e) => { e.preventDefault(); send(); });
$("input").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); send(); }
});
$("stop").addEventListener("click", () => { if (controller) controller.abort(); });
$("clear").addEventListener("click", () => {
  if (controller) controller.abort();
  conversation.length = 0;
  $("messages").textContent = "";
});
fetch("/v1/models", { headers: headers() }).then((r) => r.json()).then((j) => {
  if (j.data && j.data[0]) $("model").textContent = j.data[0].id;
}).catch(() => {});
</script>
</body>
</html>
)PAGE";

}  // namespace oneinfer::serve
