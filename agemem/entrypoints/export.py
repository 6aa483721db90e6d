"""`agemem export`: from a training checkpoint to a model directory anyone can load.

The export is a plain Hugging Face model directory (safetensors, ``config.json``,
``generation_config.json``, the tokenizer with its chat template) plus what an agent needs to run the
policy as it was trained:

=====================  =====================================================================
``agemem.json``        the agent settings: env (tools, tool format, encoder, context budget,
                       summarizer), sampling, steps per turn, and where the weights came from
``agemem_tools.json``  the tool schemas the policy was trained with (OpenAI function format)
``system_prompt.txt``  the system prompt exactly as the policy saw it
``README.md``          the model card: training config, step, latest evaluation results
``export_check.json``  what the export's self-check measured
``adapter/``           only with ``merge_lora=False``: the LoRA adapter over the weights beside it
=====================  =====================================================================

A LoRA checkpoint is merged into its base by default (one directory, served like any model); kept
unmerged, the base weights are written to the directory and the adapter to ``adapter/``.

The export checks itself before it is published: the directory is reloaded with plain
``transformers.AutoModelForCausalLM``, its logits on a fixed prompt must equal the exported model's,
and one scripted-input conversation runs through the memory environment (:class:`agemem.entrypoints.agent.MemoryAgent`).
Everything is written to a staging directory beside ``out`` and moved into place only when the
check passes, so a failed or interrupted export never leaves a half-written model behind. File names
are this module's own constants: nothing read from the checkpoint decides where a file is written.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml

import agemem
from agemem.core.configlib import to_dict
from agemem.entrypoints.agent import AGENT_FILE, agent_settings
from agemem.train.config import TrainRunConfig

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from agemem.eval.models import ResolvedModel

TOOLS_FILE = "agemem_tools.json"
PROMPT_FILE = "system_prompt.txt"
CARD_FILE = "README.md"
CHECK_FILE = "export_check.json"
ADAPTER_DIR = "adapter"
ExportDtype = Literal["auto", "bfloat16", "float16", "float32"]
DTYPE_ALIASES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "half": "float16", "float": "float32"}
CHECK_MESSAGES = (
    "Please remember this for later: my bike lock code is 4821.",
    "What is my bike lock code?",
)
"""the self-check's scripted user turns: a fact to keep, then a question that needs it."""
LOGIT_TOLERANCE = {"torch.float32": 1e-4, "torch.bfloat16": 2e-2, "torch.float16": 5e-3}
"""self-check: largest logit difference allowed, relative to the largest logit, per weight dtype."""
CHECK_MAX_TOKENS = 96
"""tokens per reply in the self-check (enough for one tool call; a check, not an evaluation)."""


class ExportError(ValueError):
    """The export cannot be written: bad source, occupied destination, or a failed self-check."""


@dataclass(frozen=True)
class ExportSettings:
    merge_lora: bool = True
    """merge a LoRA adapter into its base (one plain model); false: base weights + ``adapter/``."""
    dtype: ExportDtype = "auto"
    """dtype of the written weights; auto: the dtype the policy trained in (``policy.dtype``)."""
    force: bool = False
    """replace a non-empty ``out`` (it is only removed once the new export has passed its check)."""
    check: bool = True
    """reload the directory and run the self-check before publishing it."""
    eval_results: tuple[str, ...] = ()
    """extra ``results.json`` files (or folders holding them) for the model card, besides ``<run>/eval/``."""
    device: str = "cpu"
    """device the export loads the model on (``cpu`` needs no GPU; ``auto`` uses one when present)."""

    def __post_init__(self) -> None:
        dtype = DTYPE_ALIASES.get(self.dtype, self.dtype)
        if dtype not in ("auto", "bfloat16", "float16", "float32"):
            raise ExportError(f"dtype={self.dtype!r}: use auto, bf16 (bfloat16), fp16 (float16) or fp32 (float32)")
        object.__setattr__(self, "dtype", dtype)


@dataclass
class ExportReport:
    out: Path
    kind: str
    """checkpoint, lora (a standalone adapter) or hf."""
    step: int | None
    merged: bool
    """a LoRA adapter was merged into the written weights."""
    adapter: bool
    """the directory holds the unmerged adapter in ``adapter/``."""
    dtype: str
    files: list[str] = field(default_factory=list)
    check: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0


@dataclass
class _Source:
    """What the export reads: the resolved model, the run's config and the checkpoint's step."""

    resolved: ResolvedModel
    config: TrainRunConfig
    """the training run's config (defaults outside a run) with the caller's overrides."""
    run_dir: Path | None
    checkpoint: Path | None
    step: int | None
    base_model: str
    """the model training started from (the run's policy.model), for the model card."""


# --------------------------------------------------------------------------------------------- entry point


def export_policy(
    checkpoint: str | Path,
    out: str | Path,
    settings: ExportSettings = ExportSettings(),
    *,
    overrides: list[str] | None = None,
    config_file: str | Path | None = None,
) -> ExportReport:
    """Export the policy at ``checkpoint`` (a training run, a ``checkpoints/step_N`` directory, its ``policy/``
    folder, a LoRA adapter or a model directory) to ``out``; see the module docstring for the layout.

    The settings (base model, env, sampling) come from the run's ``config.json``; a checkpoint outside a run
    takes them from ``config_file`` (the YAML it was trained with), else the defaults; dotted ``overrides`` go last.
    """
    started = time.perf_counter()
    out = Path(out).expanduser()
    source = _locate(Path(checkpoint).expanduser(), overrides or [], config_file)
    _check_destination(out, source, settings.force)
    staging = out.parent / f".{out.name}.export-tmp"
    if staging.exists():  # left by an interrupted export
        shutil.rmtree(staging)
    shutil.rmtree(out.parent / f".{out.name}.export-old", ignore_errors=True)  # an interrupted --force's old export
    staging.mkdir(parents=True)
    try:
        model, tokenizer, report = _write_weights(source, staging, settings, out)
        _write_agent_files(source, staging, tokenizer, settings, report, out)
        if settings.check:
            report.check = check_export(staging, model, with_adapter=report.adapter)
            _write_json(_inside(staging, CHECK_FILE), report.check)
        report.files = sorted(str(p.relative_to(staging)) for p in staging.rglob("*") if p.is_file())
        _publish(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    report.out = out
    report.seconds = round(time.perf_counter() - started, 3)
    return report


# --------------------------------------------------------------------------------------------- source


def _locate(path: Path, overrides: list[str], config_file: str | Path | None) -> _Source:
    from agemem.core.runs import read_trainer_state
    from agemem.eval.models import resolve_model, training_layout

    if not path.is_dir():
        raise ExportError(
            f"--checkpoint {str(path)!r} is not a directory; give a training run (output_dir), a checkpoints/step_N "
            "directory, its policy/ folder, a LoRA adapter or a Hugging Face model directory"
        )
    _, run_dir, checkpoint = training_layout(path)
    config = _run_config(run_dir, overrides, config_file)
    resolved = resolve_model(str(path), config)  # works on a copy: ``config`` stays the run's, for the card
    step = read_trainer_state(checkpoint).step if checkpoint is not None else None
    base = config.policy.model if run_dir is not None else resolved.config.policy.model
    return _Source(resolved, config, run_dir, checkpoint, step, base)


def _run_config(run_dir: Path | None, overrides: list[str], config_file: str | Path | None) -> TrainRunConfig:
    """The training run's config (``config.json``), else ``config_file``, else the defaults; then ``overrides``."""
    from agemem.core.configlib import parse_override, read_yaml, set_dotted, validate_tree
    from agemem.entrypoints.roots import config_from_tree

    tree: dict[str, Any] = {}
    in_run = run_dir is not None and (run_dir / "config.json").is_file()
    if config_file is not None and in_run:
        raise ExportError(
            f"--config {str(config_file)!r}: the checkpoint's run already records its config ({run_dir}/config.json); "
            "drop --config, or change single values with dotted overrides"
        )
    if config_file is not None:
        tree = read_yaml(config_file)
    if in_run:
        try:
            tree = json.loads((run_dir / "config.json").read_text())
        except ValueError as err:
            raise ExportError(f"{run_dir / 'config.json'} is not the JSON agemem train writes ({err})") from err
    for item in overrides:
        set_dotted(tree, *parse_override(item))
    config = config_from_tree(tree, "export")
    validate_tree(config)
    return config


def _check_destination(out: Path, source: _Source, force: bool) -> None:
    """Refuse an occupied ``out`` without force, and with force any ``out`` whose removal would lose work."""
    target = out.resolve()
    sources = (source.checkpoint, source.run_dir, Path(source.resolved.config.policy.model), source.resolved.adapter)
    protected = [Path(p).resolve() for p in (*sources, Path.cwd(), Path.home()) if p is not None]
    for path in protected:
        if path.exists() and (target == path or target in path.parents):
            raise ExportError(
                f"--out {str(out)!r} contains {str(path)!r} (the model being exported, its run, the working "
                "directory or home); export to a new directory"
            )
    if out.exists() and not out.is_dir():
        raise ExportError(f"--out {str(out)!r} is a file; give a directory")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise ExportError(
            f"--out {str(out)!r} is not empty; pass --force to replace it (it is removed only after the new "
            "export passed its check) or choose another directory"
        )


# --------------------------------------------------------------------------------------------- weights


def _write_weights(
    source: _Source, staging: Path, settings: ExportSettings, out: Path
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase, ExportReport]:
    """Load the policy as trained, cast it, and save weights + tokenizer + generation config into ``staging``
    (``out``: where it will be published, the base an unmerged adapter names)."""
    import torch

    from agemem.core.chat import end_of_turn_ids
    from agemem.eval.models import load_model
    from agemem.rollouts.policy import load_policy, torch_dtype

    resolved = source.resolved
    policy = replace(resolved.config.policy, device=settings.device)
    resolved = replace(resolved, config=replace(resolved.config, policy=policy))
    dtype = policy.dtype if settings.dtype == "auto" else settings.dtype
    keep_adapter = resolved.adapter is not None and not settings.merge_lora
    if keep_adapter:
        model, tokenizer = load_policy(policy)  # the base alone: the adapter is written beside it
    else:
        model, tokenizer = load_model(resolved)  # an adapter comes back merged into its base
    _cast_parameters(model, torch_dtype(dtype))
    if not getattr(tokenizer, "chat_template", None):
        raise ExportError(
            f"the tokenizer of {resolved.spec!r} has no chat template; an exported policy needs the template it "
            "was trained with: set policy.tokenizer to that tokenizer"
        )
    _set_generation_config(model, tokenizer, source.config, end_of_turn_ids(tokenizer))
    with torch.no_grad():
        model.save_pretrained(staging, safe_serialization=True)
    tokenizer.save_pretrained(staging)
    if keep_adapter:
        from peft import PeftModel

        adapted = PeftModel.from_pretrained(model, resolved.adapter)  # wraps ``model`` in place: after its save
        adapter_dir = _inside(staging, ADAPTER_DIR)
        adapted.save_pretrained(adapter_dir)
        _point_adapter_at(adapter_dir / "adapter_config.json", out)
        model = adapted
    report = ExportReport(
        out=staging,
        kind=resolved.kind,
        step=source.step,
        merged=resolved.adapter is not None and settings.merge_lora,
        adapter=keep_adapter,
        dtype=dtype,
    )
    return model.eval(), tokenizer, report


def _cast_parameters(model: PreTrainedModel, dtype) -> None:
    """Cast the weights only: buffers such as RoPE's ``inv_freq`` stay float32, as ``from_pretrained(dtype=...)``
    leaves them, so the model in memory computes exactly what the reloaded export will."""
    for parameter in model.parameters():
        parameter.data = parameter.data.to(dtype)


def _set_generation_config(
    model: PreTrainedModel, tokenizer, config: TrainRunConfig, stop_ids: tuple[int, ...]
) -> None:
    """The trained sampling settings, stopping at the end of the assistant's turn (as the rollouts did)."""
    sampling = config.sampling
    generation = model.generation_config
    generation.eos_token_id = list(stop_ids)
    generation.pad_token_id = tokenizer.pad_token_id
    generation.bos_token_id = tokenizer.bos_token_id
    generation.do_sample = sampling.temperature > 0
    generation.temperature = sampling.temperature if sampling.temperature > 0 else None
    generation.top_p = sampling.top_p if sampling.temperature > 0 else None
    generation.top_k = sampling.top_k if sampling.top_k > 0 and sampling.temperature > 0 else None
    generation.max_new_tokens = sampling.max_tokens
    model.config.eos_token_id = tokenizer.convert_tokens_to_ids(tokenizer.eos_token) if tokenizer.eos_token else None


def _point_adapter_at(adapter_config: Path, base: Path) -> None:
    """The unmerged adapter's base is the export directory itself, by its final absolute path (PEFT resolves
    ``base_model_name_or_path`` from the working directory; the self-check passes the base explicitly)."""
    data = json.loads(adapter_config.read_text())
    data["base_model_name_or_path"] = str(base.resolve())
    adapter_config.write_text(json.dumps(data, indent=2))


def _write_agent_files(
    source: _Source,
    staging: Path,
    tokenizer: PreTrainedTokenizerBase,
    settings: ExportSettings,
    report: ExportReport,
    out: Path,
) -> None:
    from agemem.core.prompts import system_prompt
    from agemem.core.tools import tool_schemas

    env = source.config.env
    offered = tuple(env.tools)
    origin = {
        "kind": report.kind,
        "checkpoint": str(source.checkpoint) if source.checkpoint else source.resolved.spec,
        "step": source.step,
        "base_model": source.base_model,
        "lora": "merged" if report.merged else (ADAPTER_DIR if report.adapter else None),
        "dtype": report.dtype,
        "exported_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    _write_json(_inside(staging, AGENT_FILE), agent_settings(source.config, origin))
    _write_json(_inside(staging, TOOLS_FILE), tool_schemas(offered))
    prompt = system_prompt(env.tool_format, env.system_prompt, offered, auto_retrieval=env.rag_top_k > 0)
    _inside(staging, PROMPT_FILE).write_text(prompt + "\n")
    evaluations = find_eval_results(source.run_dir, settings.eval_results)
    metrics = _training_metrics(source.run_dir, source.step)
    card = model_card(source.config, origin, evaluations, metrics, out_name=out.name)
    _inside(staging, CARD_FILE).write_text(card)


def find_eval_results(run_dir: Path | None, extra: tuple[str, ...]) -> list[dict[str, Any]]:
    """The newest result per (benchmark, model, variant) among ``<run>/eval/**/results.json`` and ``extra``."""
    files: list[Path] = []
    if run_dir is not None and (run_dir / "eval").is_dir():
        files += sorted((run_dir / "eval").rglob("results.json"))
    for item in extra:
        path = Path(item).expanduser()
        if path.is_dir():
            files += sorted(path.rglob("results.json"))
        elif path.is_file():
            files.append(path)
        else:
            raise ExportError(f"--eval-results {item!r} does not exist; give a results.json or a folder holding one")
    newest: dict[tuple[str, str, str], tuple[float, dict[str, Any]]] = {}
    for path in files:
        try:
            data = json.loads(path.read_text())
        except ValueError as err:
            raise ExportError(f"{path} is not valid JSON ({err}); remove it or fix it") from err
        for run in data if isinstance(data, list) else [data]:
            if not isinstance(run, dict):
                continue
            key = (str(run.get("benchmark", "?")), str(run.get("model", "?")), str(run.get("variant", "")))
            stamp = path.stat().st_mtime
            if key not in newest or stamp >= newest[key][0]:
                newest[key] = (stamp, {**run, "_path": str(path)})
    return [run for _, run in sorted(newest.values(), key=lambda item: item[0])]


def _training_metrics(run_dir: Path | None, step: int | None) -> dict[str, Any]:
    """The training metrics logged at the exported step (``<run>/metrics.jsonl``), when known."""
    path = run_dir / "metrics.jsonl" if run_dir is not None else None
    if path is None or step is None or not path.is_file():
        return {}
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue  # a torn last line of a killed run
    at_step = [row for row in rows if row.get("step") == step]
    return at_step[-1] if at_step else {}


_CARD_METRICS = ("reward/total", "reward/task", "episode/exact_match", "episode/memory_adds", "episode/retrievals")
_SKIPPED_RESULT_KEYS = {"played", "resumed", "wall_s", "games", "questions"}


def model_card(
    config: TrainRunConfig,
    origin: dict[str, Any],
    evaluations: list[dict[str, Any]],
    metrics: dict[str, Any],
    *,
    out_name: str,
) -> str:
    """``README.md`` of the export: front matter for the Hub, usage, provenance, evaluations, training config."""
    base = origin.get("base_model")
    front = {
        "library_name": "transformers",
        "pipeline_tag": "text-generation",
        "tags": ["agemem", "agentic-memory", "grpo", "tool-use"],
    }
    if base and not str(base).startswith(("/", ".")) and base != "tiny-random-qwen2":
        front["base_model"] = base
    step = origin.get("step")
    lines = [
        "---",
        yaml.safe_dump(front, sort_keys=False).strip(),
        "---",
        "",
        f"# {out_name}: a memory-managing policy trained with AgeMem",
        "",
        "This model manages its own memory through six tools: long-term memory (`Add_memory`, `Update_memory`, "
        "`Delete_memory`, `Retrieve_memory`) and its short-term context (`Summary_context`, `Filter_context`). "
        "It was trained with step-wise GRPO (Yu et al., *Agentic Memory*) and needs the memory environment "
        "to act: see `agemem.json`, `agemem_tools.json` and `system_prompt.txt`.",
        "",
        "## Use",
        "",
        "```bash",
        f"agemem chat --model {out_name} --memory memory.sqlite      # interactive, shows the tool calls",
        f"vllm serve {out_name}                                      # then: agemem chat --model {out_name} "
        "--endpoint http://localhost:8000/v1",
        "```",
        "",
        "```python",
        "from agemem import MemoryAgent",
        f'agent = MemoryAgent.from_pretrained("{out_name}", memory="memory.sqlite")',
        'print(agent.chat("Remember that my sister lives in Oslo.").text)',
        "```",
        "",
        f'Plain `transformers.AutoModelForCausalLM.from_pretrained("{out_name}")` loads the weights'
        + (" (the base; the LoRA adapter is in `adapter/`)." if origin.get("lora") == ADAPTER_DIR else "."),
        "",
        "## Provenance",
        "",
        "| | |",
        "|---|---|",
        f"| checkpoint | `{origin.get('checkpoint')}` |",
        f"| training step | {step if step is not None else 'n/a'} |",
        f"| base model | `{base}` |",
        f"| LoRA | {origin.get('lora') or 'none'} |",
        f"| dtype | {origin.get('dtype')} |",
        f"| exported | {origin.get('exported_at')} with agemem {agemem.__version__} |",
        "",
    ]
    if metrics:
        lines += ["## Training metrics at this step", "", "| metric | value |", "|---|---|"]
        lines += [f"| {key} | {_fmt(metrics[key])} |" for key in _CARD_METRICS if key in metrics]
        lines.append("")
    lines += ["## Evaluation", ""]
    if evaluations:
        for run in evaluations:
            scalars = {
                k: v
                for k, v in run.items()
                if isinstance(v, (int, float)) and not isinstance(v, bool) and k not in _SKIPPED_RESULT_KEYS
            }
            title = f"{run.get('benchmark', '?')} · {run.get('variant', '')} · model {run.get('model', '?')}"
            lines += [f"**{title}** (`{run['_path']}`)", "", "| metric | value |", "|---|---|"]
            lines += [f"| {k} | {_fmt(v)} |" for k, v in scalars.items()]
            lines.append("")
    else:
        lines += [
            "No evaluation results were found. Evaluate the checkpoint into `<run>/eval/` (for example "
            "`agemem eval hotpotqa --model <run> --out <run>/eval/hotpotqa`) before exporting, or pass "
            "`--eval-results`.",
            "",
        ]
    lines += [
        "## Training configuration",
        "",
        "```yaml",
        yaml.safe_dump(to_dict(config), sort_keys=False).strip(),
        "```",
        "",
    ]
    return "\n".join(lines)


def _fmt(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


# --------------------------------------------------------------------------------------------- self-check


def check_export(
    directory: Path, exported: PreTrainedModel | None = None, *, with_adapter: bool = False
) -> dict[str, Any]:
    """Reload ``directory`` with plain transformers, compare logits with ``exported`` on a fixed prompt, and run
    one scripted-input conversation through the memory environment; raises :class:`ExportError` on a mismatch."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from agemem.core.chat import encode_chat

    started = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(directory)
    reloaded = AutoModelForCausalLM.from_pretrained(directory, dtype="auto").eval()
    if with_adapter:
        from peft import PeftModel

        reloaded = PeftModel.from_pretrained(reloaded, directory / ADAPTER_DIR).eval()
    prompt = _inside(directory, PROMPT_FILE).read_text().strip()
    messages = [{"role": "system", "content": prompt}, {"role": "user", "content": CHECK_MESSAGES[0]}]
    ids = torch.tensor([encode_chat(tokenizer, messages)])
    result: dict[str, Any] = {"prompt_tokens": int(ids.shape[1]), "dtype": str(next(reloaded.parameters()).dtype)}
    if exported is not None:
        differing = _differing_weights(exported, reloaded)
        if differing:
            raise ExportError(
                f"the reloaded export's weights differ from the exported model's ({', '.join(differing[:3])}"
                f"{' ...' if len(differing) > 3 else ''}); nothing was published"
            )
        device = next(exported.parameters()).device
        with torch.no_grad():
            expected = exported(input_ids=ids.to(device)).logits.float().cpu()
            actual = reloaded(input_ids=ids).logits.float()
        difference = float((expected - actual).abs().max())
        # equal weights; kernels may still round differently in half precision
        tolerance = LOGIT_TOLERANCE[str(next(reloaded.parameters()).dtype)] * max(1.0, float(expected.abs().max()))
        result["max_abs_logit_difference"] = difference
        result["logit_tolerance"] = tolerance
        if difference > tolerance:
            raise ExportError(
                f"the reloaded export's logits differ from the exported model's by up to {difference:.3g} (tolerance "
                f"{tolerance:.3g}) although the weights are equal; nothing was published"
            )
    result["episode"] = _scripted_episode(directory, reloaded, tokenizer)
    result["seconds"] = round(time.perf_counter() - started, 3)
    return result


def _differing_weights(exported: PreTrainedModel, reloaded: PreTrainedModel) -> list[str]:
    """Names of parameters whose values are not bit-identical after the round trip (or that are missing)."""
    import torch

    theirs = dict(reloaded.named_parameters())
    differing = []
    for name, parameter in exported.named_parameters():
        other = theirs.get(name)
        if other is None or other.shape != parameter.shape or not torch.equal(other.detach().cpu(), parameter.cpu()):
            differing.append(name)
    return differing


def _scripted_episode(directory: Path, model: PreTrainedModel, tokenizer) -> dict[str, Any]:
    """Two scripted user turns through :class:`~agemem.entrypoints.agent.MemoryAgent` (greedy, in-memory LTM)."""
    from agemem.entrypoints.agent import MemoryAgent

    agent = MemoryAgent.from_loaded(
        directory, model, tokenizer, memory=None, temperature=0.0, max_tokens=CHECK_MAX_TOKENS
    )
    turns = []
    with agent:
        for message in CHECK_MESSAGES:
            reply = agent.chat(message)
            turns.append(
                {
                    "user": message,
                    "answer": reply.answer,
                    "steps": len(reply.steps),
                    "tool_calls": [event.name for step in reply.steps for event in step.tool_events],
                    "violations": [v for step in reply.steps for v in step.violations],
                }
            )
        memories = [entry.content for entry in agent.memories()]
    return {"turns": turns, "memories_after": memories}


# --------------------------------------------------------------------------------------------- files


def _inside(root: Path, name: str) -> Path:
    """``root / name``, refusing any name that would leave ``root`` (absolute, ``..``, or through a link)."""
    candidate = root / name
    if Path(name).is_absolute() or ".." in Path(name).parts:
        raise ExportError(f"refusing to write {name!r}: it would leave the export directory {str(root)!r}")
    resolved_root = root.resolve()
    if candidate.resolve() != resolved_root and resolved_root not in candidate.resolve().parents:
        raise ExportError(f"refusing to write {name!r}: it resolves outside the export directory {str(root)!r}")
    return candidate


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def _publish(staging: Path, out: Path) -> None:
    """Move the checked staging directory to ``out``, replacing it. Killed at any point, ``out`` is the old
    export, absent, or the new one: never a partial directory (the old one is renamed aside before it is
    deleted, and the rename of a directory is atomic)."""
    if out.exists():
        retired = out.parent / f".{out.name}.export-old"
        shutil.rmtree(retired, ignore_errors=True)  # left by an export killed after its first rename
        os.replace(out, retired)
        os.replace(staging, out)
        shutil.rmtree(retired, ignore_errors=True)
    else:
        os.replace(staging, out)
