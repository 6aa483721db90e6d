import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from agemem.core.config import EnvConfig
from agemem.core.configlib import ConfigError, from_dict, load_config, parse_override
from agemem.entrypoints.roots import COMMAND_ROOTS, AgeMemConfig, load_command_config
from agemem.tasks.config import with_task_sections

CONFIGS = sorted((Path(__file__).parents[2] / "configs").glob("*.yaml"))


def test_defaults_are_the_paper_settings():
    config = load_config(AgeMemConfig)
    assert config.env.context.max_context_tokens == 8192
    assert config.env.context.filter_threshold == 0.6
    assert config.env.ltm.default_top_k == 3
    assert config.env.tool_format == "agemem"


def test_yaml_then_dotted_overrides(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("env:\n  context:\n    filter_threshold: 0.7\n  ltm:\n    max_top_k: 10\n")
    config = load_config(AgeMemConfig, path, ["env.context.filter_threshold=0.5", "env.summarizer.backend=extractive"])
    assert config.env.context.filter_threshold == 0.5  # the CLI wins over the file
    assert config.env.ltm.max_top_k == 10
    assert config.env.summarizer.backend == "extractive"
    assert config.env.encoder.batch_size == 64  # untouched fields keep their defaults


def test_a_config_extends_another_key_by_key_then_overrides_win(tmp_path):
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "root.yaml").write_text(
        "env:\n  context:\n    filter_threshold: 0.7\n    max_context_tokens: 1000\n  ltm:\n    max_top_k: 10\n"
    )
    (tmp_path / "base" / "middle.yaml").write_text(
        "extends: root.yaml\nenv:\n  context:\n    max_context_tokens: 2000\n"
    )
    (tmp_path / "run.yaml").write_text("extends: base/middle.yaml\nenv:\n  ltm:\n    max_top_k: 12\n")
    config = load_config(AgeMemConfig, tmp_path / "run.yaml", ["env.context.filter_threshold=0.5"])
    # each file wins over the one it extends, key by key; the command line wins over all
    assert config.env.context.max_context_tokens == 2000 and config.env.ltm.max_top_k == 12
    assert config.env.context.filter_threshold == 0.5
    assert config.env.ltm.default_top_k == 3  # nobody set it: the default


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("extends: missing.yaml\n", "extends 'missing.yaml', but .* does not exist"),
        ("extends: run.yaml\n", "loops back to itself"),
        ("extends: [a.yaml]\n", "must name another YAML file"),
    ],
)
def test_a_bad_extends_names_the_file_and_the_problem(tmp_path, text, message):
    (tmp_path / "run.yaml").write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_config(AgeMemConfig, tmp_path / "run.yaml")


@pytest.mark.parametrize(
    ("override", "value"),
    [("a.b=1", 1), ("a.b=0.5", 0.5), ("a.b=true", True), ("a.b=[1, 2]", [1, 2]), ("a.b=x y", "x y")],
)
def test_override_values_parse_as_yaml_for_typed_fields(override, value):
    key, text = parse_override(override)
    assert key == "a.b" and text.as_yaml() == value


@pytest.mark.parametrize(
    ("override", "field", "value"),
    [
        ("env.summarizer.model=0123", "model", "0123"),  # YAML 1.1 would read octal 83
        ("env.summarizer.model=1.10", "model", "1.10"),
        ("env.summarizer.model=no", "model", "no"),  # YAML 1.1 would read False
        ("env.system_prompt=Answer: briefly", "system_prompt", "Answer: briefly"),  # would be a mapping
        ("env.summarizer.temperature=1e-3", "temperature", 0.001),  # YAML 1.1 reads 1e-3 as a string
    ],
)
def test_string_overrides_are_kept_verbatim(override, field, value):
    config = load_config(AgeMemConfig, None, [override, "env.summarizer.backend=extractive"])
    section = config.env if field == "system_prompt" else config.env.summarizer
    assert getattr(section, field) == value


def test_non_string_yaml_value_for_a_string_field_says_to_quote_it(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("env:\n  summarizer:\n    model: 0123\n")
    with pytest.raises(ConfigError, match="quote it in YAML"):
        load_config(AgeMemConfig, path)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["env.context.filter_treshold=0.5"], "did you mean 'env.context.filter_threshold'"),
        (["env.context.filter_threshold=high"], "env.context.filter_threshold must be a number"),
        (["env.context.filter_threshold=1.5"], "env.context.filter_threshold=1.5 is a cosine similarity"),
        (["env.tool_format=xml"], "env.tool_format='xml' is not allowed; choose one of 'agemem', 'native'"),
        (["env.ltm.default_top_k=0"], "env.ltm.default_top_k=0 must be in [1, max_top_k=20]"),
        (["env.ltm.default_top_k=true"], "env.ltm.default_top_k must be an integer"),
        (["env.summarizer.backend=openai"], "backend=openai needs model="),
        (["env.context=3"], "env.context must be a mapping"),
        (["env.context.filter_threshold"], "must look like key.sub=value"),
        (["learn.sft_answer_copies=-1"], "learn.sft_answer_copies=-1 must be >= 0"),
        (["learn.sft_maintenance_drills=true", "learn.sft_drills=0"], "set learn.sft_drills > 0 or"),
        (["data.synthetic.revised_question_share=1.5"], "revised_question_share=1.5 must be in [0, 1]"),
        (["data.synthetic.restate_unchanged=true"], "set revisions >= 1 or restate_unchanged=false"),
        (["grpo.advantage_std_floor=-0.5"], "grpo.advantage_std_floor=-0.5 must be >= 0"),
        (["reward.terms=calls"], "reward.terms='calls' is not allowed; choose one of 'effects', 'paper'"),
        (["reward.round_limit_scope=stage2"], "choose one of 'all', 'stage3'"),
        (["learn.sft_micro_batches=5"], "learn.sft_micro_batches=5 must be >= 1 and divide learn.sft_batch_size=12"),
        (
            ["learn.sft_answer_copies=8", "learn.expert_quote_evidence=false"],
            "set learn.expert_quote_evidence=true or learn.sft_answer_copies=0",
        ),
    ],
)
def test_bad_values_name_the_key_and_the_fix(overrides, message):
    with pytest.raises(ConfigError) as info:
        load_command_config("train", None, overrides)  # learn.* keys are validated by every command
    assert message in str(info.value)
    assert not str(info.value).startswith("learn.learn.")  # the section's prefix is added once, by the loader


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(AgeMemConfig, tmp_path / "nope.yaml")
    (tmp_path / "bad.yaml").write_text("env: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(AgeMemConfig, tmp_path / "bad.yaml")
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="mapping at top level"):
        load_config(AgeMemConfig, tmp_path / "list.yaml")


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_shipped_configs_load(path):
    for command, root in COMMAND_ROOTS.items():  # every file loads for every command, as that command's root
        assert type(load_command_config(command, path, [])) is with_task_sections(root)


def test_from_dict_builds_a_section_directly():
    assert from_dict(EnvConfig, {"tool_format": "native"}).tool_format == "native"


@dataclass
class _OptionalText:
    name: str | None = None
    """an optional string field."""


@pytest.mark.parametrize(("override", "value"), [("name=0123", "0123"), ("name=null", None), ("name=no", "no")])
def test_optional_string_overrides_are_verbatim_except_null(override, value):
    assert load_config(_OptionalText, None, [override]).name == value


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("rollout.introspective_top_k=25", "exceeds env.ltm.max_top_k=20"),
        ("policy.tiny_heads=5", "tiny_heads=5 must be even"),
        ("policy.tiny_hidden_size=12", "multiple of 2 x tiny_heads"),
        ("sampling.top_p=0", "top_p=0.0 must be in"),
        ("engine.backend=openai", "needs openai.model"),
    ],
)
def test_rollout_sections_are_validated(override, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(AgeMemConfig, overrides=[override])


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("env.tools=[Add_memroy]", "unknown tool 'Add_memroy'; did you mean 'Add_memory'?"),
        ("env.tools=[Add_memory,Add_memory]", "lists a tool twice"),
        ("env.rag_top_k=21", "env.rag_top_k=21 must be in [0, ltm.max_top_k=20]"),
        ("eval.variants=[agemem,agemem]", "eval.variants"),
        ("eval.variants=[rag_only]", "choose one of 'agemem', 'no_memory', 'rag', 'ltm_only'"),
        ("eval.chunk_size=0", "eval.chunk_size=0 must be >= 1"),
    ],
)
def test_tool_sets_and_evaluation_are_validated(override, message):
    with pytest.raises(ConfigError) as err:
        load_config(AgeMemConfig, overrides=[override])
    assert message in str(err.value)
