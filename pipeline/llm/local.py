"""Local transformers backend with request batching across concurrent trajectories.

The model is a local folder (default: the embedded SmolLM2-135M-Instruct from
``pipeline.llm.smollm2.ensure_model``), optionally with a peft LoRA adapter
(``cfg.adapter``) merged in for inference speed.

Batching: ``complete()`` applies the chat template (``add_generation_prompt=True``),
refuses prompts longer than ``context_tokens`` (real tokenizer count) with
``ContextLimitError``, and puts the request on a queue. One worker thread
takes the first waiting request, waits up to ``batch_wait_s`` for more (up to
``max_batch``), groups them by sampling settings and runs ONE left-padded
``generate`` call per group. Requests that arrive while a batch runs wait for
the next one (static batching, not continuous batching).

Stopping: each row stops on its own, at EOS, at its own ``max_tokens``, or as
soon as its generated text contains one of ``params.stop`` (a
``StoppingCriteria`` that marks rows finished; finished rows are padded by
``generate``). Text past the matched stop string is stripped; the stop string
itself is kept, so a completion stopped by ``stop=["```\\n"]`` ends with the
closing fence of its code block, as ``transformers serve`` does (vLLM and the
OpenAI API drop it instead). ``completion_tokens`` counts the tokens that
were generated up to the stop.

Threads: on CPU the backend sets torch's (process-wide) intra-op thread
count to ``sensible_threads()``: ``RLM_TORCH_THREADS``, else every usable core
(measured faster on an idle machine; set 1 on a busy one, see the function).

Sampling: temperature 0 is greedy; otherwise multinomial sampling with
``temperature`` / ``top_p``. The batch is seeded once, from its first
request's ``seed``: requests with different seeds DO share a batch, because
every concurrent trajectory carries its own seed and keeping them apart
would serialise generation (measured: 8 trajectories ran one after another).
Sampling is therefore reproducible for the same batch composition only.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import queue
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.config import BackendConfig
from pipeline.llm.base import Completion, ContextLimitError, GenerationParams
from pipeline.llm.smollm2 import DEFAULT_MODEL_NAME, resolve_model_path


@dataclass
class _Request:
    input_ids: list[int]
    params: GenerationParams
    future: concurrent.futures.Future = field(default_factory=concurrent.futures.Future)


def _group_key(p: GenerationParams) -> tuple:
    stop = tuple(p.stop or ())
    if p.temperature <= 0:
        return ("greedy", stop)
    return ("sample", float(p.temperature), float(p.top_p), stop)


def sensible_threads() -> int:
    """Torch intra-op threads for generation: RLM_TORCH_THREADS, else every usable core.

    On an otherwise idle 2-core machine two threads beat one (a batch of 8
    trajectories used ~1.85 cores); on a machine busy with other jobs one
    thread measured ~5x faster than two (OpenMP threads spinning against each
    other) — set RLM_TORCH_THREADS=1 there.
    """
    env = os.environ.get("RLM_TORCH_THREADS")
    if env:
        try:
            return max(1, int(env))
        except ValueError:
            raise ValueError(f"RLM_TORCH_THREADS: expected an integer, got {env!r}") from None
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, cores)


class _RowStops:
    """StoppingCriteria: per-row stop strings and per-row token limits."""

    def __init__(self, tokenizer: Any, prompt_len: int, stops: list[str], limits: list[int]):
        import torch

        self.tokenizer = tokenizer
        self.prompt_len = prompt_len
        self.stops = [s for s in stops if s]
        # A stop string of n characters spans at most n tokens, plus one overhang.
        self.tail = max((len(s) for s in self.stops), default=0) + 1
        self.limits = limits
        self.done_at: list[int | None] = [None] * len(limits)  # generated length when the row stopped
        self.stopped_by_string = [False] * len(limits)
        self._torch = torch

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        n_gen = input_ids.shape[1] - self.prompt_len
        flags = []
        for row in range(input_ids.shape[0]):
            if self.done_at[row] is not None:
                flags.append(True)
                continue
            hit = False
            if self.stops:
                start = max(self.prompt_len, input_ids.shape[1] - self.tail)
                text = self.tokenizer.decode(input_ids[row, start:], skip_special_tokens=False)
                hit = any(s in text for s in self.stops)
                self.stopped_by_string[row] = hit
            if hit or n_gen >= self.limits[row]:
                self.done_at[row] = n_gen
                flags.append(True)
            else:
                flags.append(False)
        return self._torch.tensor(flags, dtype=self._torch.bool, device=input_ids.device)


class LocalBackend:
    """A transformers causal LM served in-process, batching concurrent requests."""

    def __init__(self, cfg: BackendConfig, *, batch_wait_s: float = 0.01) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if cfg.max_batch < 1:
            raise ValueError(f"models.*.max_batch: must be >= 1, got {cfg.max_batch}")
        dtype = getattr(torch, cfg.dtype, None)
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"models.*.dtype: {cfg.dtype!r} is not a torch dtype (e.g. float32, bfloat16)")
        if cfg.device == "cpu":
            torch.set_num_threads(sensible_threads())  # process-wide: torch has no per-model setting

        adapter = Path(cfg.adapter).expanduser() if cfg.adapter else None
        if adapter is not None and not (adapter / "adapter_config.json").exists():
            raise FileNotFoundError(f"models.*.adapter: {adapter} has no adapter_config.json")
        self.cfg = cfg
        path = resolve_model_path(cfg.model)
        self.model_path = path
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        if not getattr(self.tokenizer, "chat_template", None):
            raise ValueError(f"models.*.model: {path} has no chat template")
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
        base_name = cfg.model or DEFAULT_MODEL_NAME
        self.name = base_name
        if adapter is not None:
            from peft import PeftModel

            # Merged: one plain model is faster to run than base + LoRA branches.
            model = PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()
            self.name = f"{base_name}+{adapter.name}"
        self._setup(model.to(cfg.device).eval(), batch_wait_s)

    @classmethod
    def from_model(cls, model: Any, tokenizer: Any, cfg: BackendConfig, name: str) -> LocalBackend:
        """A backend over a model already in memory (the GRPO trainer's live policy), not loaded from disk.

        The caller owns the model: it puts it in eval mode for generation and back into training after.
        """
        self = cls.__new__(cls)
        self.cfg = cfg
        self.model_path = None
        self.tokenizer = tokenizer
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.name = name
        self._setup(model, 0.01)
        return self

    def _setup(self, model: Any, batch_wait_s: float) -> None:
        cfg = self.cfg
        self.model = model
        max_pos = getattr(self.model.config, "max_position_embeddings", None) or cfg.context_tokens
        self.context_tokens = min(cfg.context_tokens, max_pos)
        self.max_batch = cfg.max_batch
        self.batch_wait_s = batch_wait_s
        self.generate_calls = 0  # generate() invocations, for tests and benchmarks
        self.batch_sizes: list[int] = []
        self._queue: queue.Queue[_Request | None] = queue.Queue()
        self._worker: threading.Thread | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ public

    def encode(self, messages: list[dict[str, str]]) -> list[int]:
        text = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    async def complete(self, messages: list[dict[str, str]], params: GenerationParams) -> Completion:
        ids = self.encode(messages)
        if len(ids) > self.context_tokens:
            raise ContextLimitError(
                f"prompt of {len(ids)} tokens exceeds the {self.context_tokens}-token context of {self.name}"
            )
        if params.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {params.max_tokens}")
        start = time.monotonic()
        req = _Request(ids, params)
        self._start_worker()
        self._queue.put(req)
        comp: Completion = await asyncio.wrap_future(req.future)
        comp.latency_s = time.monotonic() - start
        return comp

    async def aclose(self) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            worker, self._worker = self._worker, None
        if worker is not None:
            self._queue.put(None)
            worker.join(timeout=60)

    # ------------------------------------------------------------------ worker

    def _start_worker(self) -> None:
        with self._lock:
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._run, name="local-backend-batcher", daemon=True)
                self._worker.start()

    def _collect(self, first: _Request) -> tuple[list[_Request], bool]:
        batch = [first]
        deadline = time.monotonic() + self.batch_wait_s
        stop = False
        while len(batch) < self.max_batch:
            remaining = deadline - time.monotonic()
            try:
                item = (
                    self._queue.get(timeout=max(0.0, remaining))
                    if remaining > 0
                    else self._queue.get_nowait()
                )
            except queue.Empty:
                break
            if item is None:
                stop = True
                break
            batch.append(item)
        return batch, stop

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch, stop = self._collect(first)
            groups: dict[tuple, list[_Request]] = {}
            for req in batch:
                groups.setdefault(_group_key(req.params), []).append(req)
            for reqs in groups.values():
                live = [r for r in reqs if r.future.set_running_or_notify_cancel()]
                if not live:
                    continue
                try:
                    results = self._generate(live)
                except BaseException as exc:  # noqa: BLE001 - handed to every caller
                    for r in live:
                        r.future.set_exception(exc)
                else:
                    for r, comp in zip(live, results, strict=True):
                        r.future.set_result(comp)
            if stop:
                return

    def _generate(self, reqs: list[_Request]) -> list[Completion]:
        import torch

        params = reqs[0].params
        stops = list(params.stop or [])
        width = max(len(r.input_ids) for r in reqs)
        pad = self.tokenizer.pad_token_id
        input_ids = torch.full((len(reqs), width), pad, dtype=torch.long)
        attention = torch.zeros((len(reqs), width), dtype=torch.long)
        for i, r in enumerate(reqs):
            n = len(r.input_ids)
            input_ids[i, width - n :] = torch.tensor(r.input_ids, dtype=torch.long)
            attention[i, width - n :] = 1
        limits = [r.params.max_tokens for r in reqs]
        criteria = _RowStops(self.tokenizer, width, stops, limits)
        kwargs: dict[str, Any] = {
            # A model trained with activation checkpointing has use_cache off in its config; generation needs it.
            "use_cache": True,
            "max_new_tokens": max(limits),
            "pad_token_id": pad,
            "stopping_criteria": [criteria],
        }
        if params.temperature > 0:
            kwargs.update(
                do_sample=True, temperature=float(params.temperature), top_p=float(params.top_p), top_k=0
            )
            if params.seed is not None:
                torch.manual_seed(params.seed)
        else:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        device = self.model.device
        with torch.inference_mode():
            out = self.model.generate(
                input_ids=input_ids.to(device), attention_mask=attention.to(device), **kwargs
            )
        self.generate_calls += 1
        self.batch_sizes.append(len(reqs))
        eos_ids = self._eos_ids()
        results = []
        for i, r in enumerate(reqs):
            gen = out[i, width:].tolist()
            n = criteria.done_at[i] if criteria.done_at[i] is not None else len(gen)
            n = min(n, r.params.max_tokens)
            gen = gen[:n]
            finish = "length"
            for j, tok in enumerate(gen):
                if tok in eos_ids:
                    gen, finish = gen[: j + 1], "stop"
                    break
            text = self.tokenizer.decode(gen, skip_special_tokens=True)
            cut = _cut_at_stop(text, stops)
            if cut is not None:
                text, finish = cut, "stop"
            results.append(
                Completion(
                    text=text,
                    prompt_tokens=len(r.input_ids),
                    completion_tokens=len(gen),
                    model=self.name,
                    finish_reason=finish,
                )
            )
        return results

    def _eos_ids(self) -> set[int]:
        eos = self.model.generation_config.eos_token_id
        if eos is None:
            eos = self.tokenizer.eos_token_id
        ids = eos if isinstance(eos, list) else [eos]
        return {i for i in ids if i is not None}


def _cut_at_stop(text: str, stops: list[str]) -> str | None:
    """Text up to and including the earliest stop string, or None when none occurs."""
    best: int | None = None
    for s in stops:
        if not s:
            continue
        i = text.find(s)
        if i >= 0 and (best is None or i + len(s) < best):
            best = i + len(s)
    return None if best is None else text[:best]


def make_local(cfg: BackendConfig) -> LocalBackend:
    return LocalBackend(cfg)
