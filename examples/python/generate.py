#!/usr/bin/env python3
"""generate.py: stream text from a Qwen3 graph with the oneinfer Python module.

    generate.py MODEL.onnx TOKENIZER.json PROMPT [--max-new-tokens N] [--temperature T]
                [--top-k K] [--top-p P] [--seed S] [--threads N] [--chat]

Prints the text as it streams (Generator.stream), then one JSON line:
    {"prompt_ids": [...], "generated_ids": [...], "text": "..."}
Generation stops after --max-new-tokens ids or at <|im_end|> / <|endoftext|>.
"""
import argparse
import json
import sys

import oneinfer


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model")
    p.add_argument("tokenizer")
    p.add_argument("prompt")
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--chat", action="store_true", help="wrap the prompt in ChatML user/assistant turns")
    a = p.parse_args()

    tokenizer = oneinfer.Tokenizer(a.tokenizer)
    session = oneinfer.Session(a.model, threads=a.threads)
    generator = oneinfer.Generator(session)
    prompt = a.prompt
    if a.chat:
        prompt = tokenizer.apply_chat_template([{"role": "user", "content": prompt}])
    prompt_ids = tokenizer.encode(prompt)
    stop_ids = [i for i in (tokenizer.token_id("<|im_end|>"), tokenizer.token_id("<|endoftext|>")) if i is not None]

    ids = []
    for token in generator.stream(prompt_ids, max_new_tokens=a.max_new_tokens, temperature=a.temperature,
                                  top_k=a.top_k, top_p=a.top_p, seed=a.seed, stop_ids=stop_ids):
        ids.append(token)
        print(tokenizer.decode([token], skip_special=True), end="", flush=True, file=sys.stderr)
    print(file=sys.stderr)
    session.close()
    print(json.dumps({"prompt_ids": prompt_ids, "generated_ids": ids,
                      "text": tokenizer.decode(ids, skip_special=True)}))


if __name__ == "__main__":
    main()
