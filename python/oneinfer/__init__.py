"""oneinfer: run ONNX models and generate text from Python (numpy in, numpy out).

    import numpy as np, oneinfer
    s = oneinfer.Session("model.onnx", threads=4)
    print(s.inputs)                       # [IOInfo(name='x', dtype='float32', shape=['N', 3])]
    y, = s.run({"x": np.ones((2, 3), np.float32)})

docs/api.md ("The Python module") describes every name. Library errors raise oneinfer.Error
carrying the library's message and code; the GIL is released while the engine runs.
"""
import json as _json
import os as _os
import queue as _queue
import threading as _threading

from ._errors import Error
from ._oneinfer import IOInfo, Session, apply_chat_template as _apply_chat_template, version
from . import _oneinfer

__all__ = ["Error", "Generator", "IOInfo", "Session", "Tokenizer", "version"]

_DONE = object()


class Generator:
    """Text generation over a causal-LM Session (oneinfer::Generator).

    One Generator runs one sequence at a time (calls from several threads wait their turn);
    several Generators may share a Session. The generator keeps the session's model loaded even
    after session.close().
    """

    def __init__(self, session):
        self._native = _oneinfer._Generator(session)

    @property
    def vocab_size(self):
        """The vocabulary size (the logits' last dimension)."""
        return self._native.vocab_size

    def generate(self, prompt_ids, max_new_tokens=32, temperature=0.0, top_k=0, top_p=1.0, seed=0,
                 stop_ids=(), callback=None):
        """The generated ids (a list of int) after prompt_ids.

        temperature 0 is greedy; otherwise sampling with top_k (0 = no limit), top_p and seed.
        Generation ends after max_new_tokens ids or after emitting one of stop_ids.
        callback(id) is called with each id as it is made, on the calling thread; returning
        False stops generation after that id (None or True goes on). An exception raised by the
        callback stops generation and is re-raised here.
        """
        return self._native.generate(list(prompt_ids), max_new_tokens, temperature, top_k, top_p, seed,
                                     list(stop_ids), callback)

    def stream(self, prompt_ids, **options):
        """Yields each generated id as it is made (generate()'s options, without callback).

        Generation runs on a worker thread; leaving the loop early stops it after the next id.
        """
        if "callback" in options:
            raise TypeError("stream() takes no callback; iterate over it instead")
        ids = _queue.Queue()
        stop = _threading.Event()

        def on_token(token):
            ids.put(token)
            return not stop.is_set()

        def work():
            try:
                self.generate(prompt_ids, callback=on_token, **options)
                ids.put(_DONE)
            except BaseException as e:  # handed to the consumer, raised there
                ids.put(e)

        worker = _threading.Thread(target=work, name="oneinfer-generate", daemon=True)
        worker.start()
        try:
            while True:
                item = ids.get()
                if item is _DONE:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            stop.set()
            worker.join()


class Tokenizer:
    """A byte-level BPE tokenizer read from a Hugging Face tokenizer.json (oneinfer::Tokenizer)."""

    def __init__(self, path, tokenizer_config=None):
        """path: a tokenizer.json. tokenizer_config: the tokenizer_config.json whose chat_template
        apply_chat_template renders; by default the one beside path, if it has a template."""
        self._native = _oneinfer._Tokenizer(path)
        self._template = None
        if tokenizer_config is None:
            beside = _os.path.join(_os.path.dirname(_os.fspath(path)), "tokenizer_config.json")
            if _os.path.exists(beside):
                try:
                    self._template = _oneinfer._ChatTemplate(beside)
                except Error as e:
                    if e.code != "NOT_FOUND":  # a config without a template keeps ChatML
                        raise
        else:
            self._template = _oneinfer._ChatTemplate(_os.fspath(tokenizer_config))

    @property
    def vocab_size(self):
        """Largest id + 1 over the vocabulary and added tokens."""
        return self._native.vocab_size

    def encode(self, text):
        """The ids of text (a str), as a list of int."""
        return self._native.encode(text)

    def decode(self, ids, skip_special=False):
        """The text of ids; skip_special leaves special tokens out."""
        return self._native.decode(list(ids), skip_special)

    def token_id(self, token):
        """The id of a token string such as "<|im_end|>", or None."""
        return self._native.token_id(token)

    def apply_chat_template(self, messages, add_generation_prompt=True, tools=None, **kwargs):
        """The prompt text for a conversation: messages is a list of {"role", "content", ...} dicts.

        Renders the model's chat_template (oneinfer::ChatTemplate) as transformers does, with
        tools and further template variables (such as enable_thinking=False) as keyword
        arguments; without a template, ChatML (the Qwen family's form, oneinfer::FormatChatML).
        With add_generation_prompt the text ends with the assistant's turn opened.
        """
        if self._template is None:
            if tools is not None or kwargs:
                raise ValueError("tools and template variables need a chat template (tokenizer_config.json)")
            return _apply_chat_template(messages, add_generation_prompt)
        return self._template.render(_json.dumps(list(messages), ensure_ascii=False), add_generation_prompt,
                                     "" if tools is None else _json.dumps(list(tools), ensure_ascii=False),
                                     _json.dumps(kwargs, ensure_ascii=False) if kwargs else "")
