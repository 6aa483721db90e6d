"""A config choice and the registry that implements it name the same things.

The config (core layer) validates a choice at load with a ``Literal``; the function that implements each
choice lives in the trainer (a layer above, which core may not import). These checks keep the two in step:
a new rule registered without its config value, or the reverse, fails here rather than at step 1 of a run.
"""

from dataclasses import fields
from typing import get_args, get_type_hints

import pytest

from agemem.train.advantages import ADVANTAGE_RULES
from agemem.train.config import GRPOConfig
from agemem.train.loss import AGGREGATIONS


@pytest.mark.parametrize(
    ("field", "registry"), [("advantage_scale", ADVANTAGE_RULES), ("loss_aggregation", AGGREGATIONS)]
)
def test_config_choices_equal_the_registered_rules(field, registry):
    assert field in {f.name for f in fields(GRPOConfig)}
    choices = get_args(get_type_hints(GRPOConfig)[field])
    assert set(choices) == set(registry)
