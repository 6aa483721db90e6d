"""The CPU learning recipe (`agemem learn`) and everything only it uses.

tokenizer (:mod:`.task_tokenizer`) -> scripted expert demonstrations (:mod:`.expert`) -> copy warm-up
(:mod:`.copy_task`) and SFT warm start (:mod:`.sft`) -> GRPO (``agemem.train``) -> held-out evaluation
(:mod:`.evaluate`); its settings are :mod:`.config`, the run itself :mod:`.recipe`.
"""

from agemem.recipes.learn.config import LearnConfig, LearnRunConfig
from agemem.recipes.learn.recipe import learn, report_table

__all__ = ["LearnConfig", "LearnRunConfig", "learn", "report_table"]
