"""Is each memory pressure of the synthetic task family real? For each, the recipe's scripted expert plays the same
tasks twice through the real driver and environment of ``configs/learn_cpu.yaml`` (real Qwen tokenizer, real
MiniLM encoder): once using the tool the pressure calls for, once skipping it, everything else equal. A pressure is
real when using the tool raises exact match (the task score alone, no reward terms) clearly above skipping it.

* ``recall``: the Stage-1 context is gone by Stage 3 (the episode resets it), so the answer is only in long-term
  memory: an expert that stores every fact, retrieves before answering vs one that does not retrieve;
* ``revisions``: one stated fact changes in a later Stage-1 message (``data.synthetic.revisions=1``) and the
  question asks it: an expert that updates the stale entry (Retrieve, then Update) vs one that stores the change
  beside it; both retrieve before answering and read the first statement about the person they see;
* ``revisions_delete``: the same, the stale entry deleted and the change stored as a new one (Retrieve, then
  Delete_memory and Add_memory), the recipe's way (``learn.expert_maintenance: delete``);
* ``revisions_mixed``: the same change, but only half the questions ask it
  (``data.synthetic.revised_question_share=0.5``); the rest ask a fact that did not change, the changed person's
  other fact included. Storing only the change (what GRPO learned when every question asked it) now fails half the
  tasks: update vs store the change beside the stale entry;
* ``revisions_mixed_replace``: the same tasks, the rewrite (the entry keeps its unchanged fact) vs overwriting the
  entry with the changed sentence alone (``learn.expert_maintenance: replace``, which loses it);
* ``revisions_restated_overwrite``: the mixed questions, and the change message restates the person's other facts
  (``data.synthetic.restate_unchanged``): overwriting the entry the expert's own Add stored, in reply to the change
  and without a lookup, with the message as it came (``learn.expert_maintenance: overwrite``, short ids) vs storing
  the message beside it; both store whole messages, as the recipe's expert does;
* ``revisions_restated_shortcut``: the same tasks, overwriting vs the shortcut GRPO found when every question asked
  the change: store no person's first message, only the changes;
* ``revisions_restated_distractors`` and ``revisions_mixed_distractors``: the restated and the mixed rows with
  every Stage-2 look-alike stored as well (a mistake GRPO made more often on the restated tasks): how much a
  stored look-alike costs each at retrieval (``top_k=1``);
* ``context``: Stage 2 is long (8 messages of 8 look-alike sentences) and a prompt over 1,024 tokens fails, as a
  request over a served model's window does (``rollout.max_prompt_tokens``): an expert that summarises the
  context after each Stage-2 message (``Summary_context``) vs one that lets it grow.

Prints a table (EM of each arm, the paired difference with its 95% t-interval, the tool calls that tell the arms
apart) and writes ``bench/results/pressures.json``.

    python bench/pressures.py                  # 200 tasks per pressure, about 12 minutes on 2 cores
    python bench/pressures.py --tasks 40 --out /tmp/pressures.json
    python bench/pressures.py --only context       # one pressure again; the others' rows in --out are kept
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from agemem.core.chat import load_tokenizer
from agemem.core.configlib import load_config
from agemem.core.encoders import build_encoder
from agemem.recipes.learn import LearnRunConfig
from agemem.recipes.learn.evaluate import ci_dict
from agemem.recipes.learn.expert import ExpertHabits
from agemem.recipes.learn.recipe import play_expert
from agemem.rewards.judges import exact_match
from agemem.tasks import load_tasks

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Pressure:
    name: str
    overrides: tuple[str, ...]
    """settings of the tasks that carry the pressure."""
    uses: ExpertHabits
    skips: ExpertHabits
    tool: str
    """the tool whose calls tell the arms apart."""


CAREFUL = ExpertHabits(store_fact=1.0, store_distractor=0.0, retrieve=1.0, update_stale=1.0)
NO_FIX = ExpertHabits(1.0, 0.0, 1.0, update_stale=0.0)
"""stores every fact and the change beside it, always retrieves: the revisions pressures' skipping arm."""
# the change's message needs up to 3 steps (Retrieve, the fix, reply) beyond the people's 2 each (6)
REVISED = ("data.synthetic.revisions=1", "rollout.stage1_max_steps=10")
MIXED = (*REVISED, "data.synthetic.revised_question_share=0.5")
# the change message restates the person's other fact; ids a small policy copies from the Add's result
RESTATED = (*MIXED, "data.synthetic.restate_unchanged=true", "env.ltm.id_style=short")
OVERWRITE = ExpertHabits(1.0, 0.0, 1.0, update_stale=1.0, maintenance="overwrite", whole_message=True)
"""overwrites the entry its own Add stored, in reply to the change, with the message as it came (no lookup)."""
PRESSURES = (
    Pressure("recall", (), CAREFUL, ExpertHabits(1.0, 0.0, 0.0, update_stale=1.0), "Retrieve_memory"),
    Pressure("revisions", REVISED, CAREFUL, NO_FIX, "Update_memory"),
    Pressure(
        "revisions_delete",
        # the same tasks, the stale entry deleted and the change stored (Retrieve, then Delete + Add in one reply)
        REVISED,
        ExpertHabits(1.0, 0.0, 1.0, update_stale=1.0, maintenance="delete"),
        NO_FIX,
        "Delete_memory",
    ),
    Pressure("revisions_mixed", MIXED, CAREFUL, NO_FIX, "Update_memory"),
    Pressure(
        "revisions_mixed_replace",
        # both arms call Update_memory once a change; what differs is what the entry keeps
        MIXED,
        CAREFUL,
        ExpertHabits(1.0, 0.0, 1.0, update_stale=1.0, maintenance="replace"),
        "Update_memory",
    ),
    Pressure(
        "revisions_restated_overwrite",
        RESTATED,
        OVERWRITE,
        ExpertHabits(1.0, 0.0, 1.0, update_stale=0.0, whole_message=True),
        "Update_memory",
    ),
    Pressure(
        "revisions_restated_shortcut",
        RESTATED,
        OVERWRITE,
        ExpertHabits(0.0, 0.0, 1.0, update_stale=0.0, whole_message=True, store_change=1.0),
        "Update_memory",
    ),
    Pressure(
        "revisions_restated_distractors",
        # revisions_restated_overwrite with every Stage-2 look-alike stored too: does a long restated entry lose
        # to a short stored look-alike at top_k=1 more than a one-change entry does (revisions_mixed_distractors)?
        RESTATED,
        ExpertHabits(1.0, 1.0, 1.0, update_stale=1.0, maintenance="overwrite", whole_message=True),
        ExpertHabits(1.0, 1.0, 1.0, update_stale=0.0, whole_message=True),
        "Update_memory",
    ),
    Pressure(
        "revisions_mixed_distractors",
        MIXED,
        ExpertHabits(1.0, 1.0, 1.0, update_stale=1.0),
        ExpertHabits(1.0, 1.0, 1.0, update_stale=0.0),
        "Update_memory",
    ),
    Pressure(
        "context",
        # 8 Stage-2 messages of 8 look-alike sentences each against a 1,024-token prompt cap (a served model's
        # window: a longer request fails and the episode ends); 2 steps a message (summary, reply)
        (
            "data.synthetic.distractors_per_task=8",
            "data.synthetic.distractor_sentences=8",
            "distractors.count=8",
            "rollout.stage2_max_steps=16",
            "rollout.max_prompt_tokens=1024",
        ),
        ExpertHabits(1.0, 0.0, 1.0, update_stale=1.0, summarise_context=1.0),
        CAREFUL,
        "Summary_context",
    ),
)


def play_arm(config: LearnRunConfig, tasks, tokenizer, encoder, habits: ExpertHabits, tool: str) -> dict:
    """EM per task and the mean calls of ``tool`` per episode of one arm."""
    trajectories = play_expert(config, tasks, tokenizer, encoder, habits)
    by_id = {t.id: t for t in tasks}
    em = {t.task_id: exact_match(t.answer or "", by_id[t.task_id].answer) for t in trajectories}
    calls = [sum(c["name"] == tool for s in t.steps for c in s.tool_calls) for t in trajectories]
    return {"em": em, "tool_calls": sum(calls) / len(calls)}


def commit() -> str:
    """This checkout's commit (each row records the one it was measured at)."""
    import subprocess

    argv = ["git", "describe", "--always", "--dirty"]  # "-dirty": measured on uncommitted changes
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    return done.stdout.strip() or "unknown"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7, help="the synthetic generator's seed (held-out-like tasks)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "pressures.json"))
    parser.add_argument("--only", choices=[p.name for p in PRESSURES], help="measure one pressure, keep the others")
    args = parser.parse_args()
    console = Console(width=None if sys.stdout.isatty() else 140)  # a log keeps each row on one line
    tokenizer = load_tokenizer()
    rows = []
    for pressure in (p for p in PRESSURES if args.only in (None, p.name)):
        overrides = [
            f"data.synthetic.num_tasks={args.tasks}",
            f"data.synthetic.seed={args.seed}",
            "logging.progress=false",
            *pressure.overrides,
        ]
        config = load_config(LearnRunConfig, str(ROOT / "configs" / "learn_cpu.yaml"), overrides=overrides)
        encoder = build_encoder(config.env.encoder)
        tasks = load_tasks(config)
        started = time.monotonic()
        uses = play_arm(config, tasks, tokenizer, encoder, pressure.uses, pressure.tool)
        skips = play_arm(config, tasks, tokenizer, encoder, pressure.skips, pressure.tool)
        differences = [uses["em"][t.id] - skips["em"][t.id] for t in tasks]
        row = {
            "pressure": pressure.name,
            "overrides": list(pressure.overrides),
            "tasks": len(tasks),
            "tool": pressure.tool,
            "em_uses": sum(uses["em"].values()) / len(tasks),
            "em_skips": sum(skips["em"].values()) / len(tasks),
            "em_difference": ci_dict(differences),
            "tool_calls_uses": uses["tool_calls"],
            "tool_calls_skips": skips["tool_calls"],
            "seconds": round(time.monotonic() - started, 1),
            "commit": commit(),
        }
        rows.append(row)
        console.print(f"{pressure.name}: EM {row['em_uses']:.3f} using {pressure.tool}, {row['em_skips']:.3f} without")
    if args.only and Path(args.out).exists():  # the other pressures' rows as they were measured
        kept = {row["pressure"]: row for row in json.loads(Path(args.out).read_text())["pressures"]}
        kept[args.only] = rows[0]
        rows = [kept[p.name] for p in PRESSURES if p.name in kept]
    table = Table(title=f"memory pressures: the scripted expert with and without the tool ({args.tasks} tasks each)")
    columns = ("pressure", "tool", "EM using it", "EM skipping it", "difference [95% CI]", "calls using / skipping")
    for column in columns:
        table.add_column(column, justify="left" if column in ("pressure", "tool") else "right")
    for row in rows:
        d = row["em_difference"]
        table.add_row(
            row["pressure"],
            row["tool"],
            f"{row['em_uses']:.3f}",
            f"{row['em_skips']:.3f}",
            f"{d['mean']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]",
            f"{row['tool_calls_uses']:.2f} / {row['tool_calls_skips']:.2f}",
        )
    console.print(table)
    record = {
        "what": "exact match of the scripted expert using vs skipping the tool each pressure calls for, same tasks "
        "(configs/learn_cpu.yaml's env and rollout, real tokenizer and encoder), paired per task",
        "machine": f"{os.cpu_count()} CPU cores, {platform.system()}",
        "seed": args.seed,
        "pressures": rows,
    }
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    console.print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
