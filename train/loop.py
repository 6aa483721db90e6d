"""`agemem train`: step-wise GRPO (AgeMem §3.4, Algorithm 2) on accelerate.

:func:`train` reads top to bottom; each optimizer step is

1. rollout   — this rank's tasks x K episodes with the current policy (the episode of the task ``data.source``
   names, agemem.tasks: three-stage QA, ALFWorld games, ...);
2. score     — the task's composite reward of every trajectory (rewards/ through the task's scorer);
3. advantage — group-normalised over each task's K rollouts, on the global batch;
4. samples   — every LLM step a sample, consecutive prefix steps merged;
5. update    — the clipped GRPO loss with the k3 KL, micro-batched by tokens;
6. sync      — push the new weights into the engine (vLLM); the transformers engine shares them;
7. log       — metrics.jsonl / wandb / tensorboard, trajectory samples;
8. checkpoint — every ``checkpoint.every`` steps, atomically, verified by a manifest.

A preemption signal (``checkpoint.on_signals``) is acted on after steps 1 and 8, by every rank together:
see :mod:`agemem.train.preemption`. The pieces are built once by :class:`TrainRun` from the config.
"""

from __future__ import annotations

import functools
import json
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agemem.core.configlib import ConfigError, to_dict
from agemem.core.devicemem import CudaPeaks
from agemem.core.hostmem import (
    GIB,
    MemoryReleaser,
    peak_resident_bytes,
    peak_window_resets,
    reset_peak,
    resident_bytes,
)
from agemem.core.runs import (
    CheckpointError,
    checkpoint_problems,
    is_main_process,
    list_checkpoints,
    resolve_checkpoint,
    scan_checkpoints,
)
from agemem.rewards.base import TrajectoryScorer
from agemem.rewards.composite import check_readable
from agemem.rollouts.build import build_driver, build_engine, build_resources
from agemem.rollouts.config import PolicyConfig
from agemem.rollouts.distractors import build_distractor_generator, distractor_cache, prepare_distractors
from agemem.rollouts.driver import RolloutAbandonedError
from agemem.rollouts.engines.base import EngineError, derive_seed
from agemem.rollouts.records import Task, Trajectory, TrajectoryWriter
from agemem.tasks.base import load_task_pool, no_distractors, task_for_source
from agemem.train.advantages import compute_advantages
from agemem.train.checkpoint import TrainerState, load_checkpoint, save_checkpoint
from agemem.train.config import TrainRunConfig
from agemem.train.metrics import (
    MetricsLogger,
    behaviour_metrics,
    reward_metrics,
    step_line,
    trajectory_step,
    truncate_after_step,
)
from agemem.train.preemption import (
    Preemption,
    PreemptionWatch,
    TrainingPreemptedError,
    any_rank,
    clear_marker,
    parse_signals,
    write_marker,
)
from agemem.train.preflight import check_engine_logprobs, check_initial_mismatch, preflight
from agemem.train.samples import build_samples

if TYPE_CHECKING:
    from accelerate import Accelerator


@dataclass
class Runtime:
    """Values derived at run time from the config and the launch (not configurable)."""

    output_dir: Path
    rank: int
    world_size: int
    tasks_per_rank: int
    temperature: float
    total_updates: int
    """scheduler length: max_steps x epochs x mini_batches."""

    @classmethod
    def derive(cls, config: TrainRunConfig, accelerator: Accelerator) -> Runtime:
        world = accelerator.num_processes
        if config.train.tasks_per_step % world:
            raise ConfigError(
                f"train.tasks_per_step={config.train.tasks_per_step} must be a multiple of the {world} processes "
                "(each rank rolls out whole tasks: all K rollouts of a task stay on one rank)"
            )
        preflight(
            config,
            deepspeed=str(accelerator.distributed_type).endswith("DEEPSPEED"),
            cuda=accelerator.device.type == "cuda",
        )
        if config.rollout.rollouts_per_task < 2:
            raise ConfigError("rollout.rollouts_per_task must be >= 2: GRPO compares the K rollouts of a task")
        return cls(
            output_dir=Path(config.output_dir),
            rank=accelerator.process_index,
            world_size=world,
            tasks_per_rank=config.train.tasks_per_step // world,
            temperature=config.sampling.temperature,
            total_updates=max(1, config.max_steps * config.train.epochs * config.train.mini_batches),
        )


@functools.lru_cache(maxsize=2)  # a step reads one epoch's order, two across an epoch boundary
def adamw_kernels(impl: str, device: Any) -> dict[str, bool]:
    """``torch.optim.AdamW`` keyword arguments for ``train.adamw_impl`` on ``device``.

    ``auto`` picks the fused kernel on CUDA: torch's default there is ``foreach``, whose step allocates
    ``sqrt(v)`` for every trainable weight at once, an fp32 temporary the size of the weights (5.8 GiB for a 1.5B
    full fine-tune, measured by the GPU kit on an H200), and launches several kernels per op. Elsewhere ``auto``
    keeps torch's default, which the CPU tests' numbers were computed with.
    """
    import torch

    if impl == "fused" or (impl == "auto" and torch.device(device).type == "cuda"):
        return {"fused": True}
    if impl == "foreach":
        return {"foreach": True}
    if impl == "for_loop":
        return {"foreach": False}
    return {}


def task_order(n_tasks: int, epoch: int, seed: int, shuffle: bool) -> list[int]:
    order = list(range(n_tasks))
    if shuffle:
        random.Random(derive_seed(seed, epoch)).shuffle(order)
    return order


def step_tasks(tasks: list[Task], tasks_seen: int, count: int, seed: int, shuffle: bool) -> list[Task]:
    """The ``count`` tasks after global position ``tasks_seen`` in the epoch-by-epoch shuffled order."""
    chosen = []
    for position in range(tasks_seen, tasks_seen + count):
        epoch, offset = divmod(position, len(tasks))
        chosen.append(tasks[task_order(len(tasks), epoch, seed, shuffle)[offset]])
    return chosen


class TrainRun:
    """Everything a training run holds: accelerator, policy, reference, optimizer, engine, driver, scorer."""

    def __init__(self, config: TrainRunConfig, *, accelerator: Accelerator | None = None):
        import torch
        from accelerate.utils import set_seed
        from transformers import get_scheduler

        from agemem.rollouts.policy import load_policy
        from agemem.train.distributed import (
            build_accelerator,
            compute_precision,
            configure_deepspeed,
            is_deepspeed,
            log_setup,
            zero_stage,
        )
        from agemem.train.policy import Reference, TokenLogprobs, add_lora, fp32_matmul_precision, plan_precision

        # the task data.source names: its items, its episode, its reward (agemem.tasks)
        self.task_spec = task_for_source(config.data.source)
        config = self.task_spec.configure(config)
        self.config = config
        # DeepSpeed, DDP or one process as launched (a DeepSpeed launch without CUDA runs DeepSpeed on gloo)
        self.accelerator = accelerator or build_accelerator(config.train.mixed_precision or None)
        self.runtime = Runtime.derive(config, self.accelerator)
        deepspeed = is_deepspeed(self.accelerator)
        configure_deepspeed(self.accelerator, config.train)
        self.precision = plan_precision(
            config.policy.dtype, compute_precision(self.accelerator), lora=config.lora.enabled, deepspeed=deepspeed
        )
        matmul_precision = fp32_matmul_precision(
            config.train.logprob_head, self.precision.compute, self.accelerator.device.type
        )
        torch.set_float32_matmul_precision(matmul_precision)
        if deepspeed and zero_stage(self.accelerator) == 3 and config.engine.backend == "transformers":
            # every forward of a ZeRO-3 model all-gathers its shards, so ranks must make the same sequence of
            # generate() calls; episodes that end after different numbers of steps on different ranks deadlock
            # (a random policy's fixed-length episodes happen not to, a learning one's do)
            raise ConfigError(
                "DeepSpeed ZeRO-3 shards the policy's parameters, and the transformers engine would generate "
                "from them in per-rank episodes that deadlock the shard gathers; use engine.backend=vllm "
                "(weights gathered once per sync), or ZeRO-2 (launch/accelerate/zero2.yaml)"
            )
        set_seed(derive_seed(config.seed, self.runtime.rank))
        # loaded on CPU; accelerate places it (a fixed device here would put every rank on cuda:0)
        policy_cfg = PolicyConfig(**{**to_dict(config.policy), "device": "cpu"})
        # the trainable policy in its load dtype (fp32 master weights unless LoRA or DeepSpeed hold them);
        # frozen weights (reference, LoRA base) stay in policy.dtype
        lm, self.tokenizer = load_policy(replace(policy_cfg, dtype=self.precision.load_dtype))
        if config.train.gradient_checkpointing:
            lm.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if config.lora.enabled:
            lm = add_lora(lm, config.lora)
        chunk = config.train.logprob_chunk_tokens
        # the loss sees the distribution the engine samples from: tempered, and top-k / top-p truncated
        truncation = {"top_k": config.sampling.top_k, "top_p": config.sampling.top_p}
        truncation["head_fp32"] = config.train.logprob_head == "fp32"
        self.policy = TokenLogprobs(lm, temperature=self.runtime.temperature, chunk=chunk, **truncation)
        self.reference = None
        if config.grpo.beta > 0 and config.lora.enabled:
            self.reference = Reference.adapters_disabled()
        elif config.grpo.beta > 0:
            frozen_lm, _ = load_policy(policy_cfg)  # the initial weights again, in policy.dtype (no fp32 copy)
            frozen = TokenLogprobs(frozen_lm, temperature=self.runtime.temperature, chunk=chunk, **truncation)
            self.reference = Reference.frozen_copy(frozen, self.accelerator)
        params = [p for p in self.policy.parameters() if p.requires_grad]
        train = config.train
        optimizer = torch.optim.AdamW(
            params,
            lr=train.learning_rate,
            betas=tuple(train.adam_betas),
            weight_decay=train.weight_decay,
            **adamw_kernels(train.adamw_impl, self.accelerator.device),
        )
        trainable = f"{sum(p.numel() for p in params)}x{str(params[0].dtype).removeprefix('torch.')}"
        self.policy, self.optimizer = self.accelerator.prepare(self.policy, optimizer)
        log_setup(
            self.accelerator,
            {
                "trainable": trainable,
                "master_weights": self.precision.master.replace(" ", "_"),
                "frozen_dtype": self.precision.frozen_dtype,
                "fp32_matmul": matmul_precision,
            },
        )
        # not prepared: accelerate's wrapper would step it once per process per update
        self.scheduler = get_scheduler(
            train.lr_scheduler,
            self.optimizer,
            num_warmup_steps=train.warmup_steps,
            num_training_steps=self.runtime.total_updates,
        )
        self.accelerator.register_for_checkpointing(self.scheduler)
        self.lm = self.accelerator.unwrap_model(self.policy).lm

        self.tasks, pool = load_task_pool(config)
        if not self.tasks:
            raise ConfigError(f"data.source={config.data.source!r} gave no tasks")
        check_readable(config.reward, self.tasks)  # a reading that cannot score these tasks fails before any rollout
        self.resources = build_resources(config.env, self.tokenizer)
        self.distractor_generator = (
            build_distractor_generator(
                config.distractors, pool, self.resources.encoder, progress=config.logging.progress and self.is_main
            )
            if self.task_spec.uses_distractors
            else None
        )
        self.distractor_cache = distractor_cache(config.distractors)
        self.engine = build_engine(config.engine, self.lm, self.tokenizer, self.accelerator)
        if config.train.off_policy and config.engine.backend == "openai":
            check_engine_logprobs(self.engine, self.tokenizer)  # before the first rollout, with the fix named
        self.driver = build_driver(
            config.rollout,
            config.sampling,
            self.engine,
            self.tokenizer,
            self.resources,
            progress=config.logging.progress and self.is_main,
            make_episode=self.task_spec.episodes(config),
        )
        self.scorer: TrajectoryScorer = self.task_spec.scorer(config, self.resources.encoder)
        self._judge_counts: dict[str, int] = {}
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self.gpu_peaks = CudaPeaks.on(self.accelerator.device)  # None off CUDA

    @property
    def is_main(self) -> bool:
        return self.accelerator.is_main_process

    def rank_tasks(self, tasks_seen: int) -> list[Task]:
        """This rank's share of the step's tasks (every K rollouts of a task on one rank)."""
        config, runtime = self.config, self.runtime
        chosen = step_tasks(self.tasks, tasks_seen, config.train.tasks_per_step, config.seed, config.train.shuffle)
        return chosen[runtime.rank :: runtime.world_size]

    def rollout(
        self, step: int, tasks: list[Task], should_stop: Callable[[], bool] | None = None
    ) -> tuple[list[Trajectory], Any] | None:
        """This rank's trajectories and rollout stats, or None when ``should_stop`` abandoned the rollout."""
        self.policy.eval()
        if self.distractor_generator is None:  # the task has no Stage-2 distractors (ALFWorld)
            distractors = no_distractors(tasks)
        else:
            distractors = prepare_distractors(
                tasks, self.distractor_generator, self.config.distractors.count, self.distractor_cache
            )
        seed = derive_seed(self.config.seed, step, self.runtime.rank)  # a resumed step samples what it did before
        try:
            result = self.driver.run(tasks, distractors, seed=seed, should_stop=should_stop)
        except RolloutAbandonedError:
            result = None
        drain = getattr(self.engine, "drain", None)  # vLLM collectives: wait in step with ranks still generating
        if drain is not None:
            try:
                drain(self.driver.sampling)
            except EngineError:
                if result is not None:
                    raise  # a stop was not asked for: a real failure
        return None if result is None else (result.trajectories, result.stats)

    def judge_counts(self, breakdowns: list[dict[str, float]]) -> dict[str, int]:
        """This rank's judge counters since the last call: endpoint requests, cache hits, errors (after
        retries), unparsable replies, and the items the fallback judge scored instead (0s for rule judges)."""
        counters = self.scorer.report(breakdowns).get("judge", {})
        now = {key: int(value) for key, value in counters.items() if isinstance(value, int | float)}
        delta = {key: value - self._judge_counts.get(key, 0) for key, value in now.items()}
        self._judge_counts = now
        return delta

    def gather(self, value: Any) -> list[Any]:
        """``value`` of every rank, in rank order."""
        if self.runtime.world_size == 1:
            return [value]
        from accelerate.utils import gather_object

        return gather_object([value])


def train(
    config: TrainRunConfig,
    *,
    resume: bool = False,
    resume_from: str | None = None,
    accelerator: Accelerator | None = None,
) -> list[dict[str, Any]]:
    """Run ``config.max_steps`` GRPO steps; ``resume`` continues from the newest checkpoint in ``output_dir``
    that verifies, ``resume_from`` (``step_N`` or a path) from that one.

    Returns the metrics of the steps run by this call (every rank gets the global values). Raises
    :class:`TrainingPreemptedError` after checkpointing when a ``checkpoint.on_signals`` signal stopped it.
    """
    from agemem.train.update import policy_update

    resume = resume or resume_from is not None
    _check_run_folder(Path(config.output_dir), resume)  # before the setup: a mistake costs no model load
    run = TrainRun(config, accelerator=accelerator)
    output_dir = run.runtime.output_dir
    state = TrainerState(step=0, tasks_seen=0, world_size=run.runtime.world_size)
    if resume:
        state = load_checkpoint(run.accelerator, _checkpoint_to_resume(run, output_dir, resume_from))
        if state.step > config.max_steps:
            raise ConfigError(
                f"--resume: the run in {output_dir} is at step {state.step}, past max_steps={config.max_steps}; "
                f"give max_steps above {state.step} to train further (its config.json is left as it was)"
            )
        if run.is_main:
            left = config.max_steps - state.step
            print(
                f"agemem train --resume: loaded step {state.step} of {config.max_steps}"
                + (f"; {left} step{'s' * (left != 1)} to go" if left else ": the run is complete, nothing to train"),
                file=sys.stderr,
            )
        if state.step == config.max_steps:
            return []  # a requeued job of a finished run: a printed no-op, and its files stay as they are
    logger = None
    if run.is_main:
        output_dir.mkdir(parents=True, exist_ok=True)
        clear_marker(output_dir)
        (output_dir / "config.json").write_text(json.dumps(to_dict(run.config), indent=2))  # as the task set it
        logger = MetricsLogger(config, output_dir, resume_step=state.step if resume else None)
        samples_path = output_dir / "trajectories.jsonl"
        if resume:
            truncate_after_step(samples_path, state.step, trajectory_step)
        elif samples_path.exists():
            samples_path.unlink()
    history: list[dict[str, Any]] = []
    releaser = MemoryReleaser(config.train.release_memory_s).start()
    watch = PreemptionWatch(parse_signals(config.checkpoint.on_signals))
    saved_step = state.step if resume else -1
    started = time.perf_counter()
    try:
        with watch:
            while state.step < config.max_steps:
                step = state.step + 1
                timer = Timer(gpu=run.gpu_peaks)
                # 1. rollout (a preemption signal abandons it: the weights are still the last step's)
                tasks = run.rank_tasks(state.tasks_seen)
                rolled = run.rollout(step, tasks, should_stop=watch.requested)
                if any_rank(run.accelerator, rolled is None or watch.requested()):
                    raise _preempted(run, state, watch, abandoned=True, saved=saved_step == state.step)
                assert rolled is not None
                trajectories, rollout_stats = rolled
                releaser.release_now()  # the episodes' KV caches are freed: hand their pages back before the update
                timer.lap("rollout")
                # 2. score
                breakdowns = run.scorer(trajectories, tasks)
                timer.lap("score")
                # 3. advantages over the global batch (groups of K, in rank order)
                k = config.rollout.rollouts_per_task
                local_groups = [[b["total"] for b in breakdowns[i : i + k]] for i in range(0, len(breakdowns), k)]
                all_groups = [g for rank_groups in run.gather(local_groups) for g in rank_groups]
                advantages = compute_advantages(
                    all_groups, config.grpo.advantage_scale, config.grpo.advantage_eps, config.grpo.advantage_std_floor
                )
                first = run.runtime.rank * len(local_groups)
                mine = [a for g in advantages.values[first : first + len(local_groups)] for a in g]
                # 4. samples
                samples, sample_stats = build_samples(trajectories, mine, merge=config.train.merge_steps)
                if not samples:
                    raise RuntimeError(f"step {step}: no LLM step generated any token on rank {run.runtime.rank}")
                # 5. update
                update = policy_update(
                    run.accelerator, run.policy, run.optimizer, run.scheduler, run.reference, samples,
                    config.grpo, config.train, run.pad_id, progress=config.logging.progress and run.is_main,
                )  # fmt: skip
                releaser.release_now()  # and the update's activations before the next rollout
                timer.lap("update")
                if step == 1:
                    check_initial_mismatch(config, update)  # a served model that is not the policy: stop now
                # a signal that came by now keeps this step; the engine (maybe a server being preempted too) is
                # not needed again, so the sync is skipped
                stopping = step < config.max_steps and any_rank(run.accelerator, watch.requested())
                # 6. sync
                sync = getattr(run.engine, "sync_weights", None)
                if sync is not None and not stopping:
                    sync()
                timer.lap("sync")
                state = TrainerState(step, state.tasks_seen + config.train.tasks_per_step, run.runtime.world_size)
                # 7. log
                metrics = _step_metrics(
                    run, trajectories, breakdowns, advantages, sample_stats, rollout_stats, update, timer
                )
                history.append(metrics)
                if logger is not None:
                    logger.log(step, metrics)
                    _print_step(config, step, metrics, time.perf_counter() - started, len(history))
                    _write_samples(
                        output_dir / "trajectories.jsonl", step, trajectories[: config.logging.trajectory_samples]
                    )
                # 8. checkpoint
                every = config.checkpoint.every
                if step == config.max_steps or (every and step % every == 0):
                    _save(run, state)
                    saved_step = step
                if stopping:
                    raise _preempted(run, state, watch, abandoned=False, saved=saved_step == step)
    finally:
        releaser.stop()
        if logger is not None:
            logger.close()
    return history


def _print_step(config: TrainRunConfig, step: int, metrics: dict[str, Any], elapsed_s: float, steps_run: int) -> None:
    """The step's console line every ``logging.console_every`` steps and at the last."""
    every = config.logging.console_every
    if every and (step % every == 0 or step == config.max_steps):
        line = step_line(step, config.max_steps, metrics, elapsed_s=elapsed_s, steps_run=steps_run)
        print(line, file=sys.stderr, flush=True)


def _check_run_folder(output_dir: Path, resume: bool) -> None:
    """A new run never lands on another silently: a folder with checkpoints is refused (``--resume`` continues
    it), and one with an earlier run's files but no checkpoint is replaced with a printed line."""
    if resume:
        return
    checkpoints = list_checkpoints(output_dir)
    if checkpoints:
        raise ConfigError(
            f"output_dir {output_dir} already holds a run with checkpoints (newest {checkpoints[0].name}); "
            "add --resume to continue it, or choose another output_dir"
        )
    earlier = [name for name in ("config.json", "metrics.jsonl", "trajectories.jsonl") if (output_dir / name).exists()]
    if earlier and is_main_process():
        print(
            f"agemem train: {output_dir} holds an earlier run without a checkpoint ({', '.join(earlier)}); "
            "starting afresh over it",
            file=sys.stderr,
        )


def _save(run: TrainRun, state: TrainerState) -> Path:
    checkpoint = run.config.checkpoint
    return save_checkpoint(
        run.accelerator, run.runtime.output_dir, state, run.policy, run.tokenizer,
        keep_last=checkpoint.keep_last, dtype=run.config.policy.dtype, checksums=checkpoint.checksums,
    )  # fmt: skip


def _preempted(
    run: TrainRun, state: TrainerState, watch: PreemptionWatch, *, abandoned: bool, saved: bool
) -> TrainingPreemptedError:
    """Checkpoint the last complete step (unless it already is), leave the marker, and say so (every rank)."""
    from agemem.core.runs import checkpoint_dir

    path = checkpoint_dir(run.runtime.output_dir, state.step) if saved else _save(run, state)
    name = watch.received.name if watch.received is not None else "a signal on another rank"
    elapsed = time.monotonic() - watch.received_at if watch.received is not None else 0.0
    preemption = Preemption(name, state.step, str(path), abandoned, round(elapsed, 3))
    if run.is_main and name != "SIGINT":  # Ctrl-C is a person's stop, not a preemption to requeue
        write_marker(run.runtime.output_dir, preemption)
    return TrainingPreemptedError(preemption)


def _checkpoint_to_resume(run: TrainRun, output_dir: Path, resume_from: str | None) -> Path:
    """The checkpoint to load: ``resume_from`` if it verifies, else the newest that does. The main process
    verifies (reading the files once, not once per rank) and tells the others."""
    checksums = run.config.checkpoint.checksums
    choice: str | None = None
    problem = ""
    if run.is_main:
        if resume_from is not None:
            path = resolve_checkpoint(output_dir, resume_from)
            problems = checkpoint_problems(path, checksums=checksums)
            if problems:
                problem = f"--resume-from {resume_from}: {path} does not verify: {'; '.join(problems)}"
            else:
                choice = str(path)
        else:
            scan = scan_checkpoints(output_dir, checksums=checksums)
            for line in scan.describe_skipped():
                print(f"agemem train --resume: {line}", file=sys.stderr)
            if scan.chosen is None:
                problem = f"--resume: no complete checkpoint under {output_dir / 'checkpoints'}" + (
                    f" verifies ({len(scan.skipped)} skipped above); start a new run in another output_dir"
                    if scan.skipped
                    else "; run without --resume to start, or point output_dir at the run"
                )
            else:
                choice = str(scan.chosen)
        if choice is not None:
            print(f"agemem train --resume: resuming from {Path(choice).name} ({choice})", file=sys.stderr)
    if run.runtime.world_size > 1:
        from accelerate.utils import broadcast_object_list

        choice, problem = broadcast_object_list([choice, problem])
    if choice is None:
        raise CheckpointError(problem)
    return Path(choice)


class Timer:
    """Wall-clock laps: ``lap(name)`` records the time since the previous lap (or the start); with ``memory``
    also the peak resident memory of each lap in GiB (``peak_gib``; it resets the process's peak window, so
    one such timer at a time); with a ``gpu`` probe the peak GPU memory torch allocated and reserved in each lap
    (``gpu_peak_gib``, ``gpu_reserved_gib``; the probe's peak window is reset at the start and at every lap)."""

    def __init__(self, *, memory: bool = False, gpu: CudaPeaks | None = None) -> None:
        self.start = self.last = time.perf_counter()
        self.laps: dict[str, float] = {}
        self.memory = memory and peak_window_resets() and reset_peak()
        self.peak_gib: dict[str, float] = {}
        self.gpu = gpu
        self.gpu_peak_gib: dict[str, float] = {}
        self.gpu_reserved_gib: dict[str, float] = {}
        if gpu is not None:
            gpu.read_and_reset()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = now - self.last
        self.last = now
        if self.memory:
            self.peak_gib[name] = peak_resident_bytes() / GIB
            # a reset that did not take would make the next lap report this one's peak: stop reporting
            self.memory = reset_peak()
        if self.gpu is not None:
            allocated, reserved = self.gpu.read_and_reset()
            self.gpu_peak_gib[name], self.gpu_reserved_gib[name] = allocated / GIB, reserved / GIB

    def elapsed(self) -> float:
        return time.perf_counter() - self.start


def _step_metrics(
    run, trajectories, breakdowns, advantages, sample_stats, rollout_stats, update, timer
) -> dict[str, Any]:
    """Global (all-rank) metrics of one step."""
    local = {
        "episodes": len(trajectories),
        "behaviour": behaviour_metrics(trajectories),
        "breakdowns": breakdowns,
        "samples": vars(sample_stats),
        "generated_tokens": rollout_stats.generated_tokens,
        "prompt_tokens": rollout_stats.prompt_tokens,
        "cached_prompt_tokens": rollout_stats.cached_prompt_tokens,
        "judge": run.judge_counts(breakdowns),
        "resident_bytes": resident_bytes(),
        "peak_resident_bytes": peak_resident_bytes(),
        "gpu_peak_gib": timer.gpu_peak_gib,
        "gpu_reserved_gib": timer.gpu_reserved_gib,
    }
    ranks = run.gather(local)
    episodes = sum(r["episodes"] for r in ranks)
    metrics: dict[str, Any] = reward_metrics([b for r in ranks for b in r["breakdowns"]])
    keys = {key for r in ranks for key in r["behaviour"]}
    for key in sorted(keys):  # episode-weighted mean over ranks (a tool one rank never called counts as 0)
        metrics[key] = sum(r["behaviour"].get(key, 0.0) * r["episodes"] for r in ranks) / max(1, episodes)
    metrics["episode/max_context_tokens"] = max(r["behaviour"]["episode/max_context_tokens"] for r in ranks)
    values = [a for g in advantages.values for a in g]
    metrics["advantage/mean"] = sum(values) / len(values)
    metrics["advantage/abs_mean"] = sum(abs(a) for a in values) / len(values)
    metrics["advantage/zero_variance_fraction"] = advantages.zero_variance_groups / len(advantages.values)
    metrics.update({f"train/{key}": value for key, value in update.items()})
    for key in ("samples", "llm_steps", "merged_steps", "completion_tokens", "tokens_forwarded", "tokens_unmerged"):
        metrics[f"samples/{key}"] = sum(r["samples"][key] for r in ranks)
    # every judge fallback is counted, never a silent score: judge/fallbacks = the items a failed or
    # unparsable model judgement left to the rule judge this step
    for key in sorted({key for r in ranks for key in r["judge"]}):
        metrics[f"judge/{key}"] = sum(r["judge"].get(key, 0) for r in ranks)
    generated = sum(r["generated_tokens"] for r in ranks)
    metrics["time/rollout_s"] = timer.laps["rollout"]
    metrics["time/score_s"] = timer.laps["score"]
    metrics["time/update_s"] = timer.laps["update"]
    metrics["time/sync_s"] = timer.laps["sync"]
    metrics["time/step_s"] = time.perf_counter() - timer.start
    metrics["throughput/generated_tokens_per_s"] = generated / max(timer.laps["rollout"], 1e-9)
    cached, prompted = (sum(r[key] for r in ranks) for key in ("cached_prompt_tokens", "prompt_tokens"))
    metrics["throughput/prefix_cache_share"] = cached / max(prompted, 1)  # prompt KV reused, not computed
    metrics["throughput/train_tokens_per_s"] = metrics["samples/tokens_forwarded"] / max(timer.laps["update"], 1e-9)
    # the largest rank's host memory: now, and its peak since the process started (or a recipe stage began)
    metrics["memory/resident_gib"] = max(r["resident_bytes"] for r in ranks) / GIB
    metrics["memory/peak_resident_gib"] = max(r["peak_resident_bytes"] for r in ranks) / GIB
    # the largest rank's GPU memory in each phase, as torch's caching allocator saw it (CUDA only): allocated is
    # what tensors held at the phase's peak, reserved what the allocator held from the device (what a plan must fit)
    for phase in timer.gpu_peak_gib:
        metrics[f"memory/gpu_peak_gib/{phase}"] = max(r["gpu_peak_gib"][phase] for r in ranks)
        metrics[f"memory/gpu_reserved_gib/{phase}"] = max(r["gpu_reserved_gib"][phase] for r in ranks)
    metrics["episodes"] = episodes
    return metrics


def _write_samples(path: Path, step: int, trajectories: list[Trajectory]) -> None:
    """Append a step's sample of trajectories; ``agemem.rollouts.records.read_trajectories`` reads the file."""
    if not trajectories:
        return
    with TrajectoryWriter(path, append=True) as writer:
        for trajectory in trajectories:
            trajectory.meta["train_step"] = step
            writer.write(trajectory)
