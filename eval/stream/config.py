"""The `agemem eval stream` section and its root: one policy over a long stream of tasks with an experience memory."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Literal

from agemem.core.configlib import ConfigError
from agemem.eval.config import EvalRunConfig
from agemem.tasks import streams

StreamAddition = Literal["fixed", "add_all", "coarse", "strict", "policy"]
StreamDeletion = Literal["none", "periodic", "history", "combined"]
StreamRetention = Literal["none", "utility", "fifo", "lru", "lfu", "random", "ebbinghaus", "linear"]
StreamAgent = Literal["standard", "remem"]
REMEM_SETTINGS: tuple[str, ...] = ("remem_max_think", "remem_max_refine", "remem_refine_top_k", "remem_max_steps")
"""the settings only ReMem reads (they define a run only when stream.agent=remem)."""
RETENTION_FEATURES: tuple[str, ...] = (
    "success",
    "age",
    "recency",
    "frequency",
    "redundancy",
    "specificity",
    "utility",
    "utility_count",
    "similarity",
)
"""the features of the linear retention score (formulas: eval/stream/retention.py)."""


@dataclass
class StreamConfig:
    """`agemem eval stream`: one policy over a long stream of tasks with an experience memory, after Xiong et al.
    (memory addition and deletion) and TraceRetain (bounded retention)."""

    task: str = "hotpotqa"
    """the stream: hotpotqa (the questions of data.source), alfworld (ALFWorld games), synthetic (seeded fact
    questions asked again and again in paraphrase, in families; for tests and quick runs), or any registered
    environment with a stream (agemem.tasks.streams())."""
    addition: StreamAddition = "add_all"
    """fixed: the initial bank only; add_all: every execution; coarse: executions the coarse judge passes (no gold
    answer); strict: executions that are correct against the ground truth; policy: the agent decides with
    Add_memory / Delete_memory tool calls."""
    deletion: StreamDeletion = "none"
    """periodic: drop records retrieved <= alpha times in the last `window` tasks; history: drop records retrieved
    >= history_min_retrievals times whose mean downstream utility is <= history_beta; combined: either; none."""
    retention: StreamRetention = "none"
    """bounded bank: at most `capacity` records, evicting the lowest by this policy after each task (utility: lowest
    mean downstream utility, Xiong et al.'s capacity mode; fifo, lru, lfu, random, ebbinghaus, linear: TraceRetain);
    none: unbounded."""
    capacity: int = 50
    """the bank size bound of `retention` (TraceRetain: 50)."""
    retrieval: Literal["similar", "recent", "none"] = "similar"
    """similar: the top_k records whose query is most cosine-similar to the task's (ExpRAG); recent: the top_k
    newest records (ExpRecent); none: no demonstrations (the no-memory baseline)."""
    agent: StreamAgent = "standard"
    """standard: the agent acts on the task with the retrieved records as demonstrations (with addition=policy it
    also gets Add_memory / Delete_memory); remem: ReMem (Evo-Memory): in each step (a QA task; a game command) every
    reply is one operation, Think (reasoning kept in context), Refine (Retrieve / Add / Update / Merge / Delete on
    the bank) or Act (the answer or game command, which ends the step); the experience is still written by
    `addition` after the task."""
    remem_max_think: int = 3
    """ReMem: Think operations per step; a Think beyond them is refused as a malformed reply (it costs its reply)."""
    remem_max_refine: int = 4
    """ReMem: Refine operations (memory tool calls run) per step; calls beyond them are refused, not run."""
    remem_refine_top_k: int = 3
    """ReMem: records one Refine Retrieve_memory returns (its default, and the cap on the agent's own top_k)."""
    remem_max_steps: int = 8
    """ReMem: replies per step, each one operation (a malformed reply costs one too): a QA task that has not acted
    when they run out fails; a game command step that has not, passes without a command (it replaces
    alfworld.max_replies_per_step for ReMem)."""
    show_feedback: bool = False
    """demonstrations say how each record's task went (Feedback: success / failure), as Evo-Memory's experience
    records (input, output, feedback) do; ReMem always shows it."""
    top_k: int = 3
    """records shown to the agent as in-context demonstrations."""
    order: Literal["given", "shuffled", "shift"] = "given"
    """task order: as loaded; shuffled with order_seed; shift: clusters of a diagonal Gaussian mixture over the query
    embeddings (shift_clusters components, seed order_seed), played one cluster after another."""
    order_seed: int = 0
    """seed of the shuffled order and of the mixture fit of the shift order."""
    shift_clusters: int = 3
    """shift order: mixture components (clusters)."""
    limit: int = 0
    """tasks in the stream (after the initial bank's); 0 = all."""
    initial_size: int = 0
    """records in the bank before the stream starts: the first initial_size loaded tasks with their ground-truth
    executions (they are not part of the stream)."""
    initial_noise: float = 0.0
    """share of the initial records given a failed execution instead (the noisy initial memory variant)."""
    noisy_writes: int = 0
    """failed copies of the same task written after every real write (TraceRetain's noisy-write stress: 3)."""
    replay_of: str = ""
    """error-free replay: a finished stream run directory; every task gets the records that run retrieved, with their
    executions replaced by ground truth where the task has one (the bank is not edited)."""
    window: int = 20
    """periodic deletion: W, the window of tasks over which retrievals are counted; younger records are protected."""
    alpha: int = 0
    """periodic deletion: a record retrieved at most alpha times in the last W tasks is deleted."""
    periodic_every: int = 1
    """periodic deletion: checked after every this many tasks (1: after each task, a sliding window)."""
    history_min_retrievals: int = 3
    """history deletion: n, the retrievals a record needs before its downstream utility is judged."""
    history_beta: float = 0.5
    """history deletion: beta, the mean downstream utility at or below which a record is deleted."""
    evaluator: Literal["auto", "strict", "coarse"] = "auto"
    """the score of each task used by history deletion and the utility / linear retention scores; auto: coarse when
    addition=coarse, else strict (the addition's evaluator)."""
    strict_metric: Literal["em", "f1"] = "em"
    """QA streams: a task is correct by exact match, or by token F1 >= f1_threshold."""
    f1_threshold: float = 0.5
    """QA streams, strict_metric=f1: the F1 from which an answer counts as correct."""
    coarse_threshold: float = 0.5
    """coarse addition: the judge score (0-1) from which an execution is added."""
    utility_prior: float = 0.5
    """the downstream utility assumed for a record no task has retrieved yet (utility retention, linear score)."""
    decay_tau: float = 20.0
    """tasks over which the age and recency features change by a factor e (linear retention score)."""
    ebbinghaus_strength: float = 5.0
    """Ebbinghaus retention: S0, the memory strength of a never-retrieved record (each retrieval adds S0)."""
    retention_weights: dict[str, float] = field(default_factory=dict)
    """linear retention: weights replacing the hand weights per feature (success, age, recency, frequency,
    redundancy, specificity, utility, utility_count, similarity)."""
    retention_weights_file: str = ""
    """linear retention: a JSON file of weights written by `agemem eval stream --tune-retention` (CEM search)."""
    cem_iterations: int = 5
    """CEM search: iterations."""
    cem_population: int = 8
    """CEM search: weight vectors sampled per iteration, each scored by one run of the tuning stream."""
    cem_elite: float = 0.25
    """CEM search: share of the population whose mean and spread give the next sampling distribution."""
    cem_std: float = 0.5
    """CEM search: initial standard deviation of every weight around the hand weights."""
    cem_precision_weight: float = 0.5
    """CEM search: objective = success rate + this x Precision@k (precision of the retrieved records)."""
    precision_k: int = 5
    """Precision@k: records checked per task (a record is relevant when it succeeded and its task key matches)."""
    max_steps: int = 3
    """QA streams, the standard agent: agent replies per task (tool calls and format errors cost a reply); policy
    addition gets as many again for the memory turn after the task. ALFWorld: the alfworld section's step and reply
    limits apply. (ReMem: remem_max_steps.)"""
    show_context: bool = True
    """QA streams: show the question's paragraphs with it (HotpotQA distractor setting); false: closed book."""
    synthetic_tasks: int = 60
    """synthetic stream: tasks generated (initial bank included)."""
    synthetic_families: int = 8
    """synthetic stream: distinct questions, each asked again in paraphrase through the stream."""
    seed: int = 0
    """seed of random eviction and of the failed executions written as noise."""
    plot: bool = True
    """write the PNG plots (cumulative success, input vs output similarity, bank size)."""

    def validate(self) -> None:
        if self.task not in streams():  # a task that does not stream is an error naming those that do
            raise ConfigError(
                f"task={self.task!r} is no stream; choose one of {', '.join(map(repr, streams()))}, or register an "
                "environment with a stream (agemem.tasks.stream.StreamSpec)"
            )
        positive = ("capacity", "top_k", "shift_clusters", "window", "periodic_every", "history_min_retrievals")
        positive += ("cem_iterations", "cem_population", "precision_k", "max_steps", "synthetic_tasks")
        positive += ("synthetic_families", "remem_refine_top_k", "remem_max_steps")
        for name in positive:
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)} must be >= 1")
        for name in ("limit", "initial_size", "noisy_writes", "alpha", "remem_max_think", "remem_max_refine"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name}={getattr(self, name)} must be >= 0")
        unit = ("initial_noise", "history_beta", "f1_threshold", "coarse_threshold", "utility_prior")
        for name in unit:
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"{name}={getattr(self, name)} must be in [0, 1]")
        if not 0.0 < self.cem_elite <= 1.0 or self.cem_std <= 0 or self.cem_precision_weight < 0:
            raise ConfigError(
                f"cem_elite={self.cem_elite} must be in (0, 1], cem_std={self.cem_std} > 0 and "
                f"cem_precision_weight={self.cem_precision_weight} >= 0"
            )
        if self.decay_tau <= 0 or self.ebbinghaus_strength <= 0:
            raise ConfigError(
                f"decay_tau={self.decay_tau} and ebbinghaus_strength={self.ebbinghaus_strength} must be > 0"
            )
        unknown = [name for name in self.retention_weights if name not in RETENTION_FEATURES]
        if unknown:
            close = difflib.get_close_matches(unknown[0], RETENTION_FEATURES, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"features: {', '.join(RETENTION_FEATURES)}"
            raise ConfigError(f"retention_weights: unknown feature {unknown[0]!r}; {hint}")
        if (self.retention_weights or self.retention_weights_file) and self.retention != "linear":
            raise ConfigError(
                f"retention_weights / retention_weights_file weight the linear score, but retention={self.retention}; "
                "set retention=linear or drop the weights"
            )
        if self.retention_weights and self.retention_weights_file:
            raise ConfigError("give retention_weights or retention_weights_file, not both")
        if self.addition == "fixed" and self.noisy_writes:
            raise ConfigError("noisy_writes copies every write, but addition=fixed never writes; pick another addition")
        if self.agent == "remem":
            self._validate_remem()

    def _validate_remem(self) -> None:
        if self.addition == "policy":
            raise ConfigError(
                "agent=remem refines the bank with its own operations, and addition=policy gives the standard agent "
                "Add_memory / Delete_memory; pick one (ReMem writes its experience by a rule: addition=add_all)"
            )
        if self.replay_of:
            raise ConfigError("error-free replay never edits the bank, but agent=remem does; drop replay_of")
        if self.retrieval == "none":
            raise ConfigError(
                "agent=remem starts each task from retrieved records (ExpRAG's); set retrieval=similar (or recent)"
            )


@dataclass
class StreamRunConfig(EvalRunConfig):
    """`agemem eval stream`'s root: the evaluation root (models, judge, the tasks' sections) plus the stream's."""

    stream: StreamConfig = field(default_factory=StreamConfig)
    """streaming memory-management benchmarks (`agemem eval stream`)."""
