"""The effect rules of the reward terms by hand (``reward.terms=effects``): management that survives the reset and
shortened the context, maintenance that changed a meaning, storage of what memory holds, preservation matched on
whole words in what the agent kept."""

from __future__ import annotations

import json

import pytest

from agemem.core.env import EpisodeStats, FilterRecord, MemoryOpRecord, SummaryRecord
from agemem.rewards import terms
from agemem.rewards.composite import reward_breakdown
from agemem.rewards.config import RewardConfig
from tests.rewards.test_terms import trajectory


def op(kind, stage, memory_id, content, previous=None, ok=True):
    return MemoryOpRecord(kind, stage, 0, ok, memory_id, content, previous)


# ------------------------------------------------------------------ preventive


def filt(step, removed=("a distractor",), origins=("distractor",), before=100, after=80, stage=2):
    return FilterRecord(stage, step, "x", list(removed), [0.9] * len(removed), list(origins), before, after)


def summ(step, replaced=("a distractor",), origins=("distractor",), before=100, after=80, stage=2):
    return SummaryRecord(stage, step, "all", list(replaced), "gist", list(origins), before, after)


def test_management_before_a_reset_is_erased():
    # the reset between Stage 1 and 2 happened when 6 steps were done: steps 1..6 are Stage 1, step 7 on Stage 2
    stage1, stage2 = filt(4, stage=1), filt(7)
    assert terms.management_steps_effective([], [stage1, stage2], resets=[6]) == [7]
    assert terms.management_steps_effective([summ(6, stage=1)], [], resets=[6]) == []  # step 6 <= reset 6
    assert terms.management_steps_effective([summ(6, stage=1)], [], resets=[]) == [6]  # no reset: it survives
    # the paper's letter counts the call whatever the reset did
    assert terms.management_steps_paper([summ(6, stage=1)], [stage1], resets=[6]) == [6, 4]


def test_management_must_shorten_the_context():
    longer = summ(8, before=100, after=130)  # the summary is 30 tokens longer than the span it replaced
    same = filt(9, before=100, after=100)
    shorter = filt(10, before=100, after=99)
    assert terms.management_steps_effective([longer], [same, shorter]) == [10]
    # records from before the counts (None) keep the earlier rule: changed something -> counts
    assert terms.management_steps_effective([summ(3, before=None, after=None)], []) == [3]


def test_management_of_only_the_agents_own_messages_does_not_count():
    acks = filt(
        8, removed=("<answer>OK</answer>", '{"tool": "Add_memory"}'), origins=("action", "tool_result:Add_memory")
    )
    retrieved = filt(9, removed=('{"memories": []}',), origins=("tool_result:Retrieve_memory",))
    mixed = summ(10, replaced=("OK", "a distractor"), origins=("action", "distractor"))
    assert terms.management_steps_effective([mixed], [acks, retrieved]) == [10, 9]
    assert [terms.is_agents_own(o) for o in ("action", "format_error", "tool_result:Filter_context")] == [True] * 3
    assert [terms.is_agents_own(o) for o in ("distractor", "summary", "introspection", "rag")] == [False] * 4


def test_a_noop_filter_counts_nothing():
    noop = filt(7, removed=(), origins=(), before=100, after=100)
    assert terms.management_steps_effective([], [noop]) == []
    assert terms.preventive_reward(terms.management_steps_effective([], [noop]), None) == 0.0
    assert terms.preventive_reward(terms.management_steps_paper([], [noop]), None) == 1.0


# ----------------------------------------------------------------- maintenance


@pytest.mark.parametrize(
    ("text", "other", "same"),
    [
        ("Ada lives in Oslo.", "ada lives in oslo", True),  # case and the final "."
        ("Ada  lives ,in Oslo !", "Ada lives in Oslo", True),  # spacing and stray punctuation
        ("Ada's score is 3.5", "ada's score is 3.5.", True),
        ("Ada's score is 3.5", "Ada's score is 35", False),  # an inner "." is part of the number
        ("Ada was born in 1921", "Ada was born in 1922", False),
        ("Ada is a painter", "Ada is not a painter", False),
    ],
)
def test_meaning_ignores_formatting_only(text, other, same):
    assert (terms.meaning(text) == terms.meaning(other)) is same


@pytest.mark.parametrize(
    ("ops", "paper", "effective"),
    [
        # a cosmetic update (the final "." and the case): no meaning changed
        (
            [
                op("add", 1, "m1", "Ada lives in Oslo."),
                op("update", 3, "m1", "ada lives in oslo", "Ada lives in Oslo."),
            ],
            1,
            0,
        ),
        # the same fact stored twice in Stage 1, the copy deleted in Stage 3: the meaning is still held
        (
            [
                op("add", 1, "m1", "Ada lives in Oslo."),
                op("add", 1, "m2", "Ada lives in Oslo."),
                op("delete", 3, "m2", "Ada lives in Oslo."),
            ],
            1,
            0,
        ),
        # ... and a copy that differs only in format
        (
            [
                op("add", 1, "m1", "Ada lives in Oslo."),
                op("add", 1, "m2", "ada lives in oslo"),
                op("delete", 3, "m1", "Ada lives in Oslo."),
            ],
            1,
            0,
        ),
        # added and rewritten within Stage 1: the stage began without it
        (
            [op("add", 1, "m1", "Ada lives in Olso"), op("update", 1, "m1", "Ada lives in Oslo", "Ada lives in Olso")],
            1,
            0,
        ),
        # a copy rewritten to a new fact: one new meaning (the old one is still held by m1)
        (
            [
                op("add", 1, "m1", "Ada lives in Oslo"),
                op("add", 1, "m2", "Ada lives in Oslo"),
                op("update", 3, "m2", "Ada lives in Bergen", "Ada lives in Oslo"),
            ],
            1,
            1,
        ),
        # the paper's Appendix B.1: a stale entry deleted and a fresh one added: one meaning gone
        (
            [
                op("add", 1, "m1", "prefers 60-minute sessions"),
                op("delete", 3, "m1", "prefers 60-minute sessions"),
                op("add", 3, "m2", "prefers 120-minute sessions"),
            ],
            1,
            1,
        ),
        # an entry from before the episode (never added in it) rewritten: "old" gone + "new" written = 2
        ([op("update", 2, "m0", "Ada lives in Bergen", "Ada lives in Oslo")], 1, 2),
    ],
)
def test_maintenance_counts_changes_of_meaning(ops, paper, effective):
    assert terms.maintenance_count_paper(ops) == paper
    assert terms.maintenance_count_effective(ops) == effective


# --------------------------------------------------------------------- storage


def test_storage_judges_what_memory_held_after_stage_1():
    ops = [
        op("add", 1, "m1", "Ada lives in Oslo."),
        op("add", 1, "m2", "ada lives in oslo"),  # a copy up to format
        op("add", 1, "m3", "junk"),
        op("delete", 1, "m3", "junk"),  # gone before Stage 1 ended
        op("add", 1, "m4", "Bo is 7"),
        op("update", 1, "m4", "Bo is 8", "Bo is 7"),  # held with its final text
        op("add", 2, "m5", "a distractor"),  # not Stage 1
        op("delete", 3, "m1", "Ada lives in Oslo."),  # later stages do not change what Stage 1 stored
    ]
    assert terms.stored_entries_paper(ops) == ["Ada lives in Oslo.", "ada lives in oslo", "junk", "Bo is 7"]
    assert terms.stored_entries_held(ops) == ["Ada lives in Oslo.", "Bo is 8"]
    # judged by a judge that scores the fact 1 and the rest 0: paper 2 of 4 adds (the copy counts twice), held 1 of 2
    assert terms.storage_reward([1.0, 1.0, 0.0, 0.0], 0.5) == 0.5
    assert terms.storage_reward([1.0, 0.0], 0.5) == 0.5


def test_duplicating_the_fact_does_not_raise_storage():
    honest = [op("add", 1, "m1", "Ada lives in Oslo."), op("add", 1, "m2", "It rained.")]
    doubled = [*honest, op("add", 1, "m3", "Ada lives in Oslo.")]
    assert terms.stored_entries_held(doubled) == terms.stored_entries_held(honest)  # storage 1/2 either way
    assert len(terms.stored_entries_paper(doubled)) == 3  # the letter: 2 of 3 high-quality, up from 1 of 2


def test_q_final_judges_the_entries_stage_1_built_as_they_ended():
    ops = [
        op("add", 1, "m1", "Ada lives in Oslo."),
        op("add", 1, "m2", "junk"),
        op("add", 1, "m3", "ada lives in oslo"),  # a copy up to format: one meaning
        op("add", 1, "m5", "It rained."),
        op("add", 2, "m4", "a distractor"),  # added after Stage 1: not in it
        op("update", 3, "m2", "Ada lives in Oslo", "junk"),  # junk rewritten into a copy of the fact
        op("update", 3, "m5", "It rained a lot.", "It rained."),  # held with its final text
    ]
    assert terms.stored_entries_held(ops) == ["Ada lives in Oslo.", "junk", "It rained."]
    assert terms.stage1_entries_at_end(ops) == ["Ada lives in Oslo.", "It rained a lot."]
    assert terms.stage1_entries_at_end([*ops, op("delete", 3, "m5", "It rained a lot.")]) == ["Ada lives in Oslo."]
    assert terms.stage1_entries_at_end([]) == []
    assert terms.stage1_entries_at_end(ops[4:5]) == []  # Stage 1 stored nothing
    assert terms.stage1_entries_at_end(ops[:2]) == ["Ada lives in Oslo.", "junk"]  # nothing after Stage 1


def test_maintenance_pays_the_quality_it_added():
    # R_maintenance = max(0, Q_final - Q_stage1) when a change of meaning counted, else 0
    assert terms.maintenance_reward_effective(1, 0.25, 1 / 3) == pytest.approx(1 / 12)  # 1/3 - 1/4
    assert terms.maintenance_reward_effective(2, 0.5, 1.0) == 0.5  # 1 - 1/2
    assert terms.maintenance_reward_effective(1, 0.5, 0.2) == 0.0  # max(0, 0.2 - 0.5): never below 0
    assert terms.maintenance_reward_effective(0, 0.25, 1.0) == 0.0  # no change of meaning: nothing
    # the letter pays the indicator whatever the qualities
    assert terms.maintenance_reward_paper(1, 0.5, 0.2) == 1.0 and terms.maintenance_reward_paper(0, 0.0, 1.0) == 0.0


@pytest.mark.parametrize(
    ("later", "final"),
    [
        ([op("delete", 3, "m4", "zebra quasar")], ["Ada lives in Oslo.", "It rained.", "Bo sang."]),
        ([op("delete", 2, "m4", "zebra quasar")], ["Ada lives in Oslo.", "It rained.", "Bo sang."]),
        (
            [op("update", 3, "m4", "Ada lives in Oslo", "zebra quasar")],
            ["Ada lives in Oslo.", "It rained.", "Bo sang."],
        ),
    ],
    ids=["deleted in Stage 3", "deleted in Stage 2", "rewritten into a copy of the fact"],
)
def test_storing_junk_and_removing_it_earns_what_not_storing_it_earns(later, final):
    honest = [
        op("add", 1, "m1", "Ada lives in Oslo."),
        op("add", 1, "m2", "It rained."),
        op("add", 1, "m3", "Bo sang."),
    ]
    junk = [*honest, op("add", 1, "m4", "zebra quasar"), *later]
    assert terms.stage1_entries_at_end(junk) == final == terms.stage1_entries_at_end(honest)
    # a judge that scores only the fact >= 0.5: honest Q_stage1 = 1/3, no maintenance: storage + maintenance = 1/3
    honest_sum = terms.storage_reward([1.0, 0.0, 0.0], 0.5) + terms.maintenance_reward_effective(
        terms.maintenance_count_effective(honest), 1 / 3, 1 / 3
    )
    # with the junk: Q_stage1 = 1/4 (the junk is a fourth entry held), Q_final = 1/3, the removal counts (1):
    # R_storage 1/4 + R_maintenance (1/3 - 1/4 = 1/12) = 1/3, exactly the honest sum
    q_stage1 = terms.storage_reward([1.0, 0.0, 0.0, 0.0], 0.5)
    maintained = terms.maintenance_count_effective(junk)
    assert (q_stage1, maintained) == (0.25, 1)
    assert q_stage1 + terms.maintenance_reward_effective(maintained, q_stage1, 1 / 3) == pytest.approx(honest_sum)
    assert honest_sum == pytest.approx(1 / 3)
    # the letter still pays it: R_maintenance 1 against a storage 1/4: 1.25 > 1/3
    assert terms.maintenance_reward_paper(terms.maintenance_count_paper(junk), 0.25, 1 / 3) == 1.0


class ScoreByText:
    """A judge that scores an entry 1 when it holds the fact's sentence (up to format), else 0, counting items."""

    name = "by-text"

    def __init__(self):
        self.memory_items = []

    def answer_scores(self, items):
        return [1.0 for _ in items]

    def memory_scores(self, items):
        self.memory_items += list(items)
        return [float(terms.meaning(i.supporting_facts[0]) in terms.meaning(i.content)) for i in items]

    def relevance_scores(self, items):
        return [0.5 for _ in items]


def test_a_real_correction_still_pays_and_junk_removal_does_not():
    from agemem.rewards.composite import score_trajectories
    from tests.rewards.test_terms import TASK

    def played(*ops):
        t = trajectory()
        t.stats.memory_ops = [MemoryOpRecord(k, s, 0, True, i, c, p) for k, s, i, c, p in ops]
        return t

    stale = ("add", 1, "mem_1", "Ada Quill lives in Bergen.", None)  # wrong: the judge scores it 0
    other = ("add", 1, "mem_2", "It rained.", None)
    fix = ("update", 3, "mem_1", "Ada Quill lives in Oslo.", "Ada Quill lives in Bergen.")  # scored 1
    kept = played(stale, other)
    corrected = played(stale, other, fix)
    junk = played(("add", 1, "mem_1", "Ada Quill lives in Oslo.", None), other, ("add", 1, "mem_3", "zebra", None))
    junk_removed = played(*[(o.op, o.stage, o.memory_id, o.content, None) for o in junk.stats.memory_ops])
    junk_removed.stats.memory_ops.append(MemoryOpRecord("delete", 3, 0, True, "mem_3", "zebra"))
    honest = played(("add", 1, "mem_1", "Ada Quill lives in Oslo.", None), other)
    judge = ScoreByText()
    batch = [kept, corrected, junk, junk_removed, honest]
    effects = score_trajectories(batch, {"t": TASK}, judge, RewardConfig(), token_budget=8192)
    # every distinct entry of the task judged once: Bergen, "It rained.", Oslo, zebra
    assert sorted(i.content for i in judge.memory_items) == sorted(
        ["Ada Quill lives in Bergen.", "It rained.", "Ada Quill lives in Oslo.", "zebra"]
    )
    kept_b, corrected_b, junk_b, removed_b, honest_b = effects
    # the correction: Q_stage1 = 0/2 (R_storage 0), Q_final = 1/2: R_maintenance 1/2, +1/2 x 1/9 = +1/18 of total
    assert corrected_b["memory/storage"] == 0.0 and corrected_b["memory/quality_final"] == 0.5
    assert corrected_b["memory/maintenance"] == 0.5
    assert corrected_b["total"] - kept_b["total"] == pytest.approx(1 / 18)
    # the junk: R_storage 1/3 (1 of 3 held) and R_maintenance 1/2 - 1/3 = 1/6 sum to the honest 1/2 + 0
    assert removed_b["memory/storage"] == pytest.approx(1 / 3) and removed_b["memory/maintenance"] == pytest.approx(
        1 / 6
    )
    assert removed_b["total"] == pytest.approx(honest_b["total"])
    assert junk_b["total"] < honest_b["total"]  # kept junk costs 1/2 - 1/3 of storage: -1/6 x 1/9
    # the letter pays both deletes and updates 1: +1/9 over the honest agent for the junk, 1/9 for the correction
    paper = score_trajectories(batch, {"t": TASK}, ScoreByText(), RewardConfig(terms="paper"), token_budget=8192)
    assert paper[3]["memory/maintenance"] == 1.0 and paper[1]["memory/maintenance"] == 1.0
    # paper storage over the 3 Stage-1 adds: 1/3; total - honest = (1/3 + 1 - 1/2) / 9 = (5/6) / 9
    assert paper[3]["total"] - paper[4]["total"] == pytest.approx(5 / 54)


# ---------------------------------------------------------------- preservation


@pytest.mark.parametrize(
    ("text", "items"),
    [
        ("Ada Quill moved to Paris. It rained.", ["Ada Quill", "Paris"]),  # "It" starts a sentence, not an item
        ("He met J. K. Rowling in St. Louis.", ["J. K. Rowling", "St. Louis"]),  # initials and titles join
        ("She left the U.S. in 1999.", ["U.S", "1999"]),
    ],
)
def test_key_items_stop_at_sentence_ends(text, items):
    assert terms.key_items(text) == items


def test_items_match_whole_words_only():
    assert not terms.contains_item("He", "the weather")  # no "He" inside "the"
    assert terms.contains_item("He", "he said")
    assert not terms.contains_item("1996", "19961 visitors")
    assert terms.contains_item("Ed Wood", "met ed\nwood there")  # any whitespace between its words
    assert not terms.contains_item("Paris It", "Paris. It rained")  # no joining across a sentence end
    assert terms.contains_item("U.S", "the U.S. army")


def tool(name, payload, kind="tool_result"):
    return {"role": "tool", "kind": kind, "name": name, "content": json.dumps({"tool": name, **payload})}


def test_kept_context_is_what_the_agent_was_given_and_kept():
    messages = [
        {"role": "user", "kind": "distractor", "name": None, "content": "Bo likes Oslo."},
        {"role": "assistant", "kind": "action", "name": None, "content": "<think>Ada Quill, Bergen</think>"},
        tool("Add_memory", {"ok": True, "memories": [{"memory_id": "m1", "content": "Bergen 1921"}]}),
        {"role": "user", "kind": "summary", "name": None, "content": "[Summary] Cy went to Rome."},
        {"role": "user", "kind": "question", "name": None, "content": "Where does Ada Quill live?"},
        tool("Retrieve_memory", {"ok": True, "memories": [{"memory_id": "m1", "content": "Ada Quill lives in Oslo"}]}),
        tool("Retrieve_memory", {"ok": True, "memories": [{"memory_id": "m2", "content": "Dag is 40"}]}, "rag"),
        {"role": "tool", "kind": "format_error", "name": None, "content": "format error: Eve"},
    ]
    kept = terms.kept_context_text(messages)
    assert kept == "Bo likes Oslo.\n\nAda Quill lives in Oslo\n\nDag is 40"
    # the agent's own think ("Ada Quill, Bergen") and its Add_memory acknowledgement ("Bergen 1921") are not kept
    assert terms.preservation_reward(["Bergen", "1921", "Dag"], kept) == pytest.approx(1 / 3)  # Dag: 1 of 3
    # the summary preserves what the content it replaced held: "Rome" was in the distractor it summarised
    record = SummaryRecord(
        2, 5, "all", ["Cy went to Rome.", "<think>Eve</think>"], "[Summary] Cy went to Rome.", ["distractor", "action"]
    )
    sources = terms.summary_sources(messages, [record])
    assert sources == [("[Summary] Cy went to Rome.", "Cy went to Rome.")]
    assert terms.preservation_reward(["Rome", "Bergen"], kept, sources) == 0.5  # Rome: 1 of 2


def test_a_summary_cannot_launder_the_agents_own_words():
    # the agent echoed the question's "Ada Quill" in a call; a summary of that call and a distractor names her
    record = SummaryRecord(
        3,
        9,
        "all",
        ["Bo sang.", '<tool_call>{"query": "Ada Quill"}</tool_call>'],
        "[Summary] Bo sang; asked about Ada Quill.",
        ["distractor", "action"],
    )
    messages = [{"role": "user", "kind": "summary", "name": None, "content": record.summary}]
    sources = terms.summary_sources(messages, [record])
    assert terms.preservation_reward(["Ada Quill", "Bo"], "", sources) == 0.5  # Bo was given; Ada Quill was not
    # and it is not management either: 7 words of summary against the 2 given words it replaced ("Bo sang")
    assert not terms.summary_shortened(record.summary, record.replaced_contents, record.replaced_origins)
    assert terms.summary_shortened("Bo sang.", ["Bo sang loudly all night."], ["distractor"])  # 2 words < 5


def test_breakdown_searches_the_recorded_context_not_the_prompt():
    # the decoded prompt names "Ada Quill" in the system prompt; the recorded context keeps only a distractor
    config = RewardConfig(terms="paper")  # the question's items: ["Ada Quill"]
    kept_nothing = trajectory()
    kept_nothing.steps[0].prompt_text = "system: remember Ada Quill ... user: Where does Ada Quill live?"
    kept_nothing.stats.prompt_context = [{"role": "user", "kind": "distractor", "name": None, "content": "Bo sang."}]
    assert reward_breakdown(kept_nothing, 1.0, [], [], config, 8192)["context/preservation"] == 0.0
    kept_nothing.stats.prompt_context = None  # a trajectory recorded before the context was: the decoded prompt
    assert reward_breakdown(kept_nothing, 1.0, [], [], config, 8192)["context/preservation"] == 1.0


def test_breakdown_reads_the_resets():
    stats_trajectory = trajectory(filters=[4])  # a filter at step 4 that removed "It rained."
    assert reward_breakdown(stats_trajectory, 1.0, [], [], RewardConfig(), 8192)["context/preventive"] == 1.0
    stats_trajectory.stats.resets = [6]  # ... thrown away by a reset after step 6
    breakdown = reward_breakdown(stats_trajectory, 1.0, [], [], RewardConfig(), 8192)
    assert breakdown["context/preventive"] == 0.0 and breakdown["context/management_effective"] == 0.0
    paper = reward_breakdown(stats_trajectory, 1.0, [], [], RewardConfig(terms="paper"), 8192)
    assert paper["context/preventive"] == 1.0


def test_episode_stats_round_trip_keeps_the_new_records():
    stats = EpisodeStats(filters=[filt(7)], summaries=[summ(8)], resets=[6], prompt_context=[{"role": "user"}])
    back = EpisodeStats.from_json(json.loads(json.dumps(stats.to_json())))
    assert back.filters == stats.filters and back.summaries == stats.summaries
    assert back.resets == [6] and back.prompt_context == [{"role": "user"}]
