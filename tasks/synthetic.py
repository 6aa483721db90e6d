"""Synthetic recall tasks (``data.source=synthetic``, settings ``data.synthetic.*``): invented people's facts in
Stage 1, the task's own or drawn distractors in Stage 2, a question about one fact in Stage 3; the three-stage
episode and the judge's composite reward, as HotpotQA (:class:`agemem.tasks.hotpotqa.QATask`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agemem.tasks.base import register_task
from agemem.tasks.hotpotqa import QATask

if TYPE_CHECKING:
    from agemem.rollouts.records import Task
    from agemem.tasks.config import TaskRunConfig


def load_synthetic_tasks(config: TaskRunConfig) -> list[Task]:
    from agemem.rollouts.synthetic import generate_synthetic_tasks

    synthetic = config.data.synthetic
    return generate_synthetic_tasks(
        synthetic.num_tasks,
        seed=synthetic.seed,
        entities_per_task=synthetic.entities_per_task,
        attributes_per_entity=synthetic.attributes_per_entity,
        distractors_per_task=synthetic.distractors_per_task,
        revisions=synthetic.revisions,
        distractor_sentences=synthetic.distractor_sentences,
        revised_question_share=synthetic.revised_question_share,
    )


SYNTHETIC = register_task(QATask("synthetic", load_synthetic_tasks))
