"""Evaluation variants: which tools the agent gets and what the episode shows it.

| variant | tools | episode |
|---|---|---|
| ``agemem`` | all six, and registered ones ``env.tools`` adds | Stage 1 (facts), optional Stage 2 (distractors),
  Stage 3 (question) |
| ``no_memory`` | none | the question alone (no Stage 1, no Stage 2) |
| ``rag`` | Add / Update / Delete | as ``agemem``, and before every agent step the top-k LTM entries for the latest
  message are shown (the paper's -RAG ablation: STM tools replaced by retrieval-augmented prompting) |
| ``ltm_only`` | Add / Update / Delete / Retrieve | as ``agemem``, without Summary_context / Filter_context |
| ``full_context`` | none | Stage 1's messages stay in the context, unanswered, and the question follows them (no
  reset, no Stage 2): the long-context baseline the memory systems compare with on LoCoMo |
| ``mem0`` ``mem0g`` ``amem`` ``langmem`` | none | as ``rag``, but the memory system writes memory from every
  user message (its own LLM calls; the agent does not act in Stage 1) and its search results are shown
  (:mod:`agemem.eval.baselines`) |

Benchmark-independent: a harness applies a variant to its config and plays episodes as usual.
"""

from __future__ import annotations

import copy

from agemem.core.configlib import ConfigError, validate_tree
from agemem.core.tools import LTM_TOOLS, TOOL_NAMES
from agemem.eval.config import EvalRunConfig
from agemem.eval.memory_systems import eval_variants, memory_system_names

VARIANT_TOOLS: dict[str, tuple[str, ...]] = {
    "agemem": TOOL_NAMES,
    "no_memory": (),
    "rag": LTM_TOOLS,
    "ltm_only": (*LTM_TOOLS, "Retrieve_memory"),
    "full_context": (),
}
"""the tools each of AgeMem's own variants offers; a memory-system variant offers none."""


def apply_variant(config: EvalRunConfig, variant: str) -> EvalRunConfig:
    """A copy of ``config`` set up for ``variant`` (see the module table).

    Stage 2 is played only when ``eval.distractors`` is on (and never in ``no_memory`` or ``full_context``); otherwise
    ``distractors.count`` is set to 0. In ``rag`` the retrieval before every step replaces the Stage-1
    introspective retrieval (``rollout.introspective_top_k = 0``), so nothing is shown twice; the memory-system
    variants retrieve the same way, from their system.
    """
    if variant not in eval_variants():
        raise ConfigError(f"unknown variant {variant!r}; choose one of {', '.join(eval_variants())}")
    system = variant in memory_system_names()
    config = copy.deepcopy(config)
    extra = [name for name in config.env.tools if name not in TOOL_NAMES]  # registered tools (a plugin's)
    config.env.tools = list(VARIANT_TOOLS.get(variant, ()))
    if variant == "agemem":  # every built-in tool, and the registered ones the config offers
        config.env.tools += extra
    shows_memory = variant == "rag" or system
    config.env.rag_top_k = config.eval.rag_top_k if shows_memory else 0
    config.env.rag_query = config.eval.rag_query
    if shows_memory:
        config.rollout.introspective_top_k = 0
    config.rollout.stage1 = variant != "no_memory"
    config.env.rag_replace = system
    full_context = variant == "full_context"
    config.rollout.stage1_agent = not (system or full_context)  # nothing to act with in Stage 1
    config.rollout.keep_stage1_context = full_context
    if not config.eval.distractors or variant in ("no_memory", "full_context"):
        config.distractors.count = 0
    validate_tree(config)
    return config
