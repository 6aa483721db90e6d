"""Constrained decoding: completions that must match a grammar, with xgrammar.

A request that must be JSON (an OpenAI ``response_format``) or a call of given tools (a forced ``tool_choice``)
carries its grammar in :attr:`SamplingParams.grammar <agemem.rollouts.engines.base.SamplingParams.grammar>` as
EBNF text in xgrammar's dialect, the form ``vllm serve`` takes (``structured_outputs.grammar``). The transformers
engine masks each step's logits with one :class:`GrammarMasks` row per prompt. The vLLM and OpenAI engines do not
constrain yet and refuse a grammar (:func:`refuse_grammar`) rather than ignore it: a served model is constrained by
its own server (``vllm serve``, whose default structured-output backend is xgrammar too).

Why xgrammar (over outlines or lm-format-enforcer): it is vLLM's default backend, so a schema our endpoint accepts
is one ``vllm serve``'s grammar engine compiles (vLLM's defaults differ: free whitespace, every schema strict); it
compiles a JSON schema or EBNF against the
vocabulary once, with an adaptive token-mask cache (the per-step cost is a mask fill, ~0.1 ms on a CPU), and it
has a CPU kernel for applying the mask. It is an optional dependency (the ``baselines`` extra): an unconstrained
run never imports it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

INSTALL_HINT = "pip install 'agemem[baselines]' (xgrammar)"


class GrammarError(ValueError):
    """A grammar that cannot be enforced: it does not compile, or the engine cannot constrain."""


def xgrammar() -> Any:
    """The xgrammar module, or an error that says how to install it."""
    try:
        import xgrammar as xgr
    except ImportError as err:
        raise GrammarError(f"constrained decoding needs xgrammar: {INSTALL_HINT}") from err
    return xgr


MAX_COMPILED = 256
"""compiled grammars kept per compiler (least recently used dropped): each distinct schema is one, and a library
may send a new one per call (trustcall's patch schemas)."""


def refuse_grammar(sampling: Any, engine: str) -> None:
    """An engine that cannot constrain its completions says so rather than ignore ``sampling.grammar``."""
    if getattr(sampling, "grammar", None) is not None:
        raise GrammarError(
            f"the {engine} engine does not constrain completions to a grammar (a response_format or a forced "
            "tool_choice); play the model with the transformers engine, or serve it with `vllm serve` and give "
            "--model openai:<model>@<url>, whose server constrains it"
        )


class GrammarCompilers:
    """One xgrammar compiler per (tokenizer, vocabulary size, stop tokens), and the grammars it compiled: the
    vocabulary's token table is built once (~0.5 s for Qwen's 151k tokens) and a grammar once per text."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._compilers: dict[tuple[int, int, tuple[int, ...]], Any] = {}
        self._compiled: OrderedDict[tuple[int, int, tuple[int, ...], str], Any] = OrderedDict()

    def compiled(self, grammar: str, tokenizer: Any, vocab_size: int, stop_token_ids: tuple[int, ...]) -> Any:
        xgr = xgrammar()
        key = (id(tokenizer), vocab_size, stop_token_ids)
        with self._lock:
            if key not in self._compilers:
                info = xgr.TokenizerInfo.from_huggingface(
                    tokenizer, vocab_size=vocab_size, stop_token_ids=list(stop_token_ids) or None
                )
                self._compilers[key] = xgr.GrammarCompiler(info, max_threads=2)
            entry = (*key, grammar)
            if entry not in self._compiled:
                try:
                    self._compiled[entry] = self._compilers[key].compile_grammar(grammar)
                except (RuntimeError, ValueError) as err:
                    raise GrammarError(f"the grammar does not compile: {err}") from err
                while len(self._compiled) > MAX_COMPILED:
                    self._compiled.popitem(last=False)
            self._compiled.move_to_end(entry)
            return self._compiled[entry]


class GrammarMasks:
    """Per prompt of one generation call, an xgrammar matcher: :meth:`apply` sets the logits of every token the
    grammar forbids next to -inf (rows given by their prompt index), :meth:`accept` advances a row by the token it
    sampled. Once a row's grammar is complete only its stop tokens stay allowed, so the engine's own stop check
    ends it."""

    def __init__(self, compiled: Any, rows: int, vocab_size: int):
        xgr = xgrammar()
        self._xgr = xgr
        self.matchers = [xgr.GrammarMatcher(compiled) for _ in range(rows)]
        self.vocab_size = vocab_size

    def apply(self, logits_BV: torch.Tensor, rows: list[int]) -> torch.Tensor:
        bitmask = self._xgr.allocate_token_bitmask(len(rows), self.vocab_size)
        for position, row in enumerate(rows):
            self.matchers[row].fill_next_token_bitmask(bitmask, position)
        masked_BV = logits_BV.clone()
        self._xgr.apply_token_bitmask_inplace(masked_BV, bitmask.to(masked_BV.device))
        return masked_BV

    def accept(self, row: int, token: int) -> None:
        matcher = self.matchers[row]
        if not matcher.is_terminated() and not matcher.accept_token(token):
            raise RuntimeError(f"token {token} was sampled against the grammar (a masking bug)")
