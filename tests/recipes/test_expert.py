"""The imperfect synthetic expert through the real driver, env and tokenizer: what it stores,
retrieves and answers, and how often it takes each habit."""

from __future__ import annotations

import json
import re

import pytest

from agemem.core.chat import end_of_turn_ids
from agemem.recipes.learn.expert import (
    UNKNOWN_ANSWER,
    ExpertHabits,
    SyntheticExpert,
    evidence_thought,
    parse_chatml,
    stored_entry,
    tool_call_text,
    visible_answer,
)
from agemem.tasks.synthetic import BY_NAME, generate_synthetic_tasks
from tests.rollouts.scripted import play_expert


@pytest.fixture(scope="module")
def tasks():
    return generate_synthetic_tasks(6, seed=3, attributes_per_entity=2, distractors_per_task=2)


def test_perfect_expert_stores_every_fact_retrieves_and_answers_right(qwen_tokenizer, tasks):
    trajectories = play_expert(qwen_tokenizer, tasks, ExpertHabits(1.0, 0.0, 1.0))
    for trajectory, task in zip(trajectories, tasks):
        contents = [entry["content"] for entry in trajectory.final_memory]
        assert contents == [p.text for p in task.contexts]  # one entry per paragraph, in message order
        calls = [c["name"] for s in trajectory.steps for c in s.tool_calls]
        assert calls == ["Add_memory"] * 3 + ["Retrieve_memory"]
        assert trajectory.answer == task.answer
        assert trajectory.ended_by == "answer"
        assert all(not s.violations for s in trajectory.steps)
        # completions are exactly the tokenizer's encoding of the text plus <|im_end|>
        step = trajectory.steps[0]
        assert step.completion_ids[-1] == end_of_turn_ids(qwen_tokenizer)[0]
        assert qwen_tokenizer.decode(step.completion_ids[:-1]) == step.completion_text


def test_careless_expert_stores_nothing_and_answers_from_the_lookalike(qwen_tokenizer, tasks):
    trajectories = play_expert(qwen_tokenizer, tasks, ExpertHabits(0.0, 1.0, 0.0))
    for trajectory, task in zip(trajectories, tasks):
        # only the two Stage-2 distractors were stored (the bad habit at probability 1)
        assert sorted(e["content"] for e in trajectory.final_memory) == sorted(task.distractors)
        assert not any(c["name"] == "Retrieve_memory" for s in trajectory.steps for c in s.tool_calls)
        assert trajectory.answer != task.answer  # the distractors never hold the answer
        assert trajectory.answer == visible_answer(task, "\n".join(task.distractors))


@pytest.mark.parametrize("habits", [ExpertHabits(1.0, 1.0, 1.0), ExpertHabits(0.5, 0.5, 0.5, seed=2)])
def test_under_the_papers_stage_tools_the_expert_never_makes_a_refused_call(qwen_tokenizer, tasks, habits):
    # Stage 2 offers no Add_memory under the paper's sets: the distractor habit has no tool, so a demonstration
    # never teaches a call the env refuses; Stage 1 still stores and Stage 3 still retrieves as under `all`
    staged = play_expert(qwen_tokenizer, tasks, habits, stage_tools="paper")
    everywhere = play_expert(qwen_tokenizer, tasks, habits)
    for paper, everything, task in zip(staged, everywhere, tasks):
        assert all(not s.violations for s in paper.steps)
        assert not any(e["content"] in task.distractors for e in paper.final_memory)
        facts = [e["content"] for e in everything.final_memory if e["content"] not in task.distractors]
        assert [e["content"] for e in paper.final_memory] == facts
        retrieved = [
            any(c["name"] == "Retrieve_memory" for s in t.steps for c in s.tool_calls) for t in (paper, everything)
        ]
        assert retrieved[0] == retrieved[1]
    if habits.store_distractor == 1.0:  # the habit really fired where the tool was offered
        stored = [{e["content"] for e in t.final_memory} for t in everywhere]
        assert all(set(task.distractors) <= held for held, task in zip(stored, tasks))


def test_habit_rates_match_their_probabilities_and_decisions_are_reproducible(qwen_tokenizer):
    tasks = generate_synthetic_tasks(200, seed=8, attributes_per_entity=2, distractors_per_task=2)
    habits = ExpertHabits(store_fact=0.5, store_distractor=0.25, retrieve=0.6, seed=1)
    expert = SyntheticExpert(tasks, habits)
    stored = sum(expert._flip(t, f"fact:{p.title}", habits.store_fact) for t in tasks for p in t.contexts)
    retrieved = sum(expert._flip(t, "retrieve", habits.retrieve) for t in tasks)
    # 600 paragraph flips at 0.5: sd 12, so +-50 is > 4 sd; 200 retrieval flips at 0.6: sd 7, +-30
    assert abs(stored - 300) < 50
    assert abs(retrieved - 120) < 30
    first = play_expert(qwen_tokenizer, tasks[:4], habits)
    again = play_expert(qwen_tokenizer, tasks[:4], habits)
    assert [t.steps[-1].completion_ids for t in first] == [t.steps[-1].completion_ids for t in again]


def test_visible_answer_prefers_the_asked_person_then_the_closest_lookalike(tasks):
    task = tasks[0]
    support = task.supporting_facts[0].text
    lookalike = next(d for d in task.distractors if task.metadata["entity"] not in d)
    assert visible_answer(task, f"{lookalike}\n{support}") == task.answer
    assert visible_answer(task, "nothing relevant here") == UNKNOWN_ANSWER


def test_expert_refuses_non_synthetic_tasks_and_bad_probabilities(tasks):
    from dataclasses import replace

    with pytest.raises(ValueError, match="not synthetic"):
        SyntheticExpert([replace(tasks[0], metadata={"source": "hotpotqa"})], ExpertHabits())
    with pytest.raises(ValueError, match=r"retrieve=1\.5 is a probability"):
        ExpertHabits(retrieve=1.5)
    with pytest.raises(ValueError, match=r"store_change=-0\.1 is a probability"):
        ExpertHabits(store_change=-0.1)


def test_parse_chatml_splits_roles_and_tool_responses(qwen_tokenizer):
    from agemem.core.chat import render_chat

    messages = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "U"},
        {"role": "assistant", "content": "A"},
        {"role": "tool", "content": "{}"},
    ]
    parsed = parse_chatml(render_chat(qwen_tokenizer, messages))
    assert [m["role"] for m in parsed] == ["system", "user", "assistant", "user"]
    assert parsed[3]["content"] == "<tool_response>\n{}\n</tool_response>"


def test_whole_message_expert_stores_each_kept_message_verbatim(qwen_tokenizer, tasks):
    habits = ExpertHabits(1.0, 0.0, 1.0, whole_message=True)
    for trajectory, task in zip(play_expert(qwen_tokenizer, tasks, habits), tasks):
        (entry,) = trajectory.final_memory  # the one Stage-1 message (all people in it), lead-ins included
        assert all(p.text in entry["content"] for p in task.contexts)
        assert (
            entry["content"]
            == trajectory.steps[0].prompt_text.rsplit("<|im_start|>user\n", 1)[1].split("<|im_end|>")[0]
        )
        assert trajectory.answer == task.answer  # the answer is read from the retrieved message


def test_quoting_expert_thinks_the_supporting_sentence_before_the_value(qwen_tokenizer, tasks):
    habits = ExpertHabits(1.0, 0.0, 1.0, quote_evidence=True)
    for trajectory, task in zip(play_expert(qwen_tokenizer, tasks, habits), tasks):
        final = trajectory.steps[-1]
        assert final.thought is not None and final.thought.endswith(f"{task.answer}.")
        assert task.metadata["entity"] in final.thought  # the asked person's own sentence, quoted from memory
        assert final.thought in final.prompt_text  # ... word for word, so the value is a copy of what follows it
        assert trajectory.answer == task.answer


def test_clause_quoting_expert_starts_at_a_fixed_place_and_drops_the_name(qwen_tokenizer, tasks):
    habits = ExpertHabits(1.0, 0.0, 1.0, quote_evidence=True, quote_style="clause")
    for trajectory, task in zip(play_expert(qwen_tokenizer, tasks, habits), tasks):
        final = trajectory.steps[-1]
        assert final.thought.startswith("Memory: ") and task.metadata["entity"] not in final.thought
        clause = final.thought.removeprefix("Memory:")  # " has a pet gecko.": words then value, as in memory
        assert clause.endswith(f" {task.answer}.") and clause in final.prompt_text
        assert trajectory.answer == task.answer
    assert evidence_thought("Velo Quint's favourite food is sushi.", "clause") == "Memory: favourite food is sushi."
    assert evidence_thought("Velo Quint plays the harp.", "sentence") == "Velo Quint plays the harp."
    with pytest.raises(ValueError, match="quote_style='name' is not one of"):
        ExpertHabits(quote_style="name")
    with pytest.raises(ValueError, match="maintenance='rewrite' is not one of"):
        ExpertHabits(maintenance="rewrite")


@pytest.fixture(scope="module")
def revised():
    """Tasks whose asked fact changes in a later Stage-1 message."""
    return generate_synthetic_tasks(6, seed=5, attributes_per_entity=2, distractors_per_task=2, revisions=1)


def test_an_updating_expert_rewrites_the_stale_entry_and_answers_the_current_value(qwen_tokenizer, revised):
    trajectories = play_expert(
        qwen_tokenizer, revised, ExpertHabits(1.0, 0.0, 1.0, update_stale=1.0), paragraphs_per_turn=1
    )
    for trajectory, task in zip(trajectories, revised):
        (change,) = task.metadata["revisions"]
        attribute = BY_NAME[change["attribute"]]
        stale = attribute.state(change["entity"], change["old"])
        current = attribute.revise(change["entity"], change["new"])
        people = [p.text for p in task.contexts if not p.title.endswith("'s news")]
        # one entry per person, the changed person's rewritten in place; the change is not stored twice
        assert [e["content"] for e in trajectory.final_memory] == [t.replace(stale, current) for t in people]
        calls = [c["name"] for s in trajectory.steps for c in s.tool_calls]
        assert calls == ["Add_memory"] * 3 + ["Retrieve_memory", "Update_memory", "Retrieve_memory"]
        assert trajectory.answer == task.answer and all(not s.violations for s in trajectory.steps)


def test_a_replacing_expert_overwrites_the_stale_entry_with_the_sentence_it_looked_up(qwen_tokenizer, revised):
    habits = ExpertHabits(1.0, 0.0, 1.0, update_stale=1.0, maintenance="replace", whole_message=True)
    trajectories = play_expert(qwen_tokenizer, revised, habits, paragraphs_per_turn=1, id_style="short")
    for trajectory, task in zip(trajectories, revised):
        (change,) = task.metadata["revisions"]
        attribute = BY_NAME[change["attribute"]]
        current = attribute.revise(change["entity"], change["new"])
        memory = {e["memory_id"]: e["content"] for e in trajectory.final_memory}
        calls = [c for s in trajectory.steps for c in s.tool_calls]
        (lookup,) = [c for c in calls if c["name"] == "Retrieve_memory" and c["arguments"]["query"] == current]
        (update,) = [c for c in calls if c["name"] == "Update_memory"]
        # one call: the id from the lookup's result, the content the lookup's own query, word for word
        assert update["arguments"]["content"] == lookup["arguments"]["query"] == current
        assert memory[update["arguments"]["memory_id"]] == current and len(memory) == 3
        assert not any(attribute.state(change["entity"], change["old"]) in c for c in memory.values())
        assert trajectory.answer == task.answer and all(not s.violations for s in trajectory.steps)


def test_an_expert_that_looks_up_only_what_it_stored_always_finds_the_stale_entry(qwen_tokenizer):
    tasks = generate_synthetic_tasks(24, seed=9, attributes_per_entity=2, distractors_per_task=1, revisions=1)

    def lookups(only_stored: bool) -> list[tuple[bool, bool]]:
        """(the stale sentence was stored before, the lookup's result shows it) for every Stage-1 lookup."""
        habits = ExpertHabits(0.5, 0.0, 1.0, update_stale=1.0, whole_message=True, lookup_stored_only=only_stored)
        found = []
        for trajectory, task in zip(play_expert(qwen_tokenizer, tasks, habits, paragraphs_per_turn=1), tasks):
            (change,) = task.metadata["revisions"]
            stale = BY_NAME[change["attribute"]].state(change["entity"], change["old"])
            stored = False
            for step in (s for s in trajectory.steps if s.stage == 1):
                names = [c["name"] for c in step.tool_calls]
                if "Retrieve_memory" in names:
                    found.append((stored, any(stale in json.dumps(r) for r in step.tool_results)))
                stored |= any(c["name"] == "Add_memory" and stale in c["arguments"]["content"] for c in step.tool_calls)
        return found

    careful, careless = lookups(True), lookups(False)
    assert careful and all(stored and shown for stored, shown in careful)
    # the same coins without the check: the stored lookups are the same, plus some of nothing stored
    assert [item for item in careless if item[0]] == careful
    assert any(not stored and not shown for stored, shown in careless)


@pytest.mark.parametrize("id_style", ["hash", "short"])
def test_a_deleting_expert_replaces_the_stale_entry_with_the_change_as_it_came(qwen_tokenizer, revised, id_style):
    habits = ExpertHabits(1.0, 0.0, 1.0, update_stale=1.0, maintenance="delete", whole_message=True)
    trajectories = play_expert(qwen_tokenizer, revised, habits, paragraphs_per_turn=1, id_style=id_style)
    for trajectory, task in zip(trajectories, revised):
        (change,) = task.metadata["revisions"]
        attribute = BY_NAME[change["attribute"]]
        stale = attribute.state(change["entity"], change["old"])
        current = attribute.revise(change["entity"], change["new"])
        contents = [e["content"] for e in trajectory.final_memory]
        assert not any(stale in c for c in contents)  # the stale entry is gone ...
        assert sum(current in c for c in contents) == 1 and len(contents) == 3  # ... and the change stored once
        calls = [[c["name"] for c in s.tool_calls] for s in trajectory.steps if s.tool_calls]
        assert calls == [["Add_memory"]] * 3 + [["Retrieve_memory"], ["Delete_memory", "Add_memory"]] + [
            ["Retrieve_memory"]
        ]
        (deletion,) = [c for s in trajectory.steps for c in s.tool_calls if c["name"] == "Delete_memory"]
        ids = [e["memory_id"] for e in trajectory.final_memory]
        if id_style == "short":  # three people m1-m3, one of them deleted, the change stored as m4
            assert re.fullmatch(r"m[123]", deletion["arguments"]["memory_id"]) and ids[-1] == "m4"
        else:
            assert re.fullmatch(r"mem_[0-9a-f]{8}", deletion["arguments"]["memory_id"])
        assert trajectory.answer == task.answer and all(not s.violations for s in trajectory.steps)


@pytest.fixture(scope="module")
def restated():
    """Revised tasks whose change message restates the person's other fact; half the questions ask the change."""
    return generate_synthetic_tasks(
        24,
        seed=5,
        attributes_per_entity=2,
        distractors_per_task=1,
        revisions=1,
        revised_question_share=0.5,
        restate_unchanged=True,
    )


@pytest.mark.parametrize("id_style", ["hash", "short"])
def test_an_overwriting_expert_replaces_its_own_stale_entry_with_the_change_as_it_came(
    qwen_tokenizer, restated, id_style
):
    habits = ExpertHabits(1.0, 0.0, 1.0, update_stale=1.0, maintenance="overwrite", whole_message=True)
    trajectories = play_expert(qwen_tokenizer, restated, habits, paragraphs_per_turn=1, id_style=id_style)
    for trajectory, task in zip(trajectories, restated):
        (change,) = task.metadata["revisions"]
        stale = BY_NAME[change["attribute"]].state(change["entity"], change["old"])
        # no lookup: the three people stored, then one Update_memory in reply to the change, then the question
        calls = [[c["name"] for c in s.tool_calls] for s in trajectory.steps if s.tool_calls]
        assert calls == [["Add_memory"]] * 3 + [["Update_memory"], ["Retrieve_memory"]]
        adds = [s for s in trajectory.steps if any(c["name"] == "Add_memory" for c in s.tool_calls)]
        (stored_stale,) = [s for s in adds if stale in s.tool_calls[0]["arguments"]["content"]]
        (update,) = [c for s in trajectory.steps for c in s.tool_calls if c["name"] == "Update_memory"]
        # the id is the one the env named in reply to the Add that stored the stale sentence
        assert update["arguments"]["memory_id"] in stored_stale.tool_results[0]["message"]
        (fix,) = [s for s in trajectory.steps if s.tool_calls and s.tool_calls[0]["name"] == "Update_memory"]
        # the content is the message the fix answers, as it came (the last user turn of its prompt)
        last_user = fix.prompt_text.rsplit("<|im_start|>user\n", 1)[1].split("<|im_end|>")[0]
        assert update["arguments"]["content"] == last_user
        memory = {e["memory_id"]: e["content"] for e in trajectory.final_memory}
        assert len(memory) == 3 and not any(stale in c for c in memory.values())
        # the entry now holds the change message whole: the change and the person's other fact, restated
        news = next(p for p in task.contexts if p.title.endswith("'s news"))
        entry = memory[update["arguments"]["memory_id"]]
        assert all(sentence in entry for sentence in news.sentences) and entry == update["arguments"]["content"]
        assert trajectory.answer == task.answer and all(not s.violations for s in trajectory.steps)


def test_an_overwriting_expert_fixes_exactly_what_it_stored_and_never_looks_up(qwen_tokenizer, restated):
    # imperfect habits: a person's message is stored half the time and a stored stale entry overwritten half the time
    habits = ExpertHabits(0.5, 0.0, 1.0, update_stale=0.5, maintenance="overwrite", whole_message=True, seed=4)
    trajectories = play_expert(qwen_tokenizer, restated, habits, paragraphs_per_turn=1, id_style="short")
    seen = {"overwrote": 0, "stored, left": 0, "not stored": 0}
    for trajectory, task in zip(trajectories, restated):
        (change,) = task.metadata["revisions"]
        stale = BY_NAME[change["attribute"]].state(change["entity"], change["old"])
        stage1 = [c for s in trajectory.steps if s.stage == 1 for c in s.tool_calls]
        assert "Retrieve_memory" not in [c["name"] for c in stage1]
        stored = any(c["name"] == "Add_memory" and stale in c["arguments"]["content"] for c in stage1)
        updates = [c for c in stage1 if c["name"] == "Update_memory"]
        kept = any(stale in e["content"] for e in trajectory.final_memory)
        if updates:  # only ever the stale entry, which is then gone
            assert stored and not kept and len(updates) == 1
            seen["overwrote"] += 1
        else:
            assert kept == stored
            seen["stored, left" if stored else "not stored"] += 1
        assert all(not s.violations for s in trajectory.steps)
    assert all(seen.values()), seen  # every branch taken on these 24 tasks


def test_the_shortcut_expert_stores_only_the_change_and_misses_the_other_people(qwen_tokenizer, restated):
    habits = ExpertHabits(0.0, 0.0, 1.0, whole_message=True, store_change=1.0)
    trajectories = play_expert(qwen_tokenizer, restated, habits, paragraphs_per_turn=1, id_style="short")
    kinds = set()
    for trajectory, task in zip(trajectories, restated):
        (change,) = task.metadata["revisions"]
        news = next(p for p in task.contexts if p.title.endswith("'s news"))
        (entry,) = [e["content"] for e in trajectory.final_memory]  # the change message, nothing else
        assert all(sentence in entry for sentence in news.sentences)
        # the restated change answers every question about the changed person, none about the other two
        about_changed = task.metadata["entity"] == change["entity"]
        assert (trajectory.answer == task.answer) == about_changed
        kinds.add((task.metadata["type"], about_changed))
    assert kinds == {("revised-fact", True), ("unchanged-fact", True), ("unchanged-fact", False)}


def test_stored_entry_reads_the_id_from_the_result_of_the_add_that_stored_it():
    def reply(*calls):
        return {"role": "assistant", "content": tool_call_text("Keep.", list(calls))}

    def results(*payloads):
        blocks = "\n".join(f"<tool_response>\n{json.dumps(p)}\n</tool_response>" for p in payloads)
        return {"role": "user", "content": blocks}

    conversation = [
        {"role": "user", "content": "Ana Bel plays the harp. Ana Bel lives in Oslo."},
        # two calls, two results in the calls' order: the second Add stored the sentence
        reply(("Retrieve_memory", {"query": "harp"}), ("Add_memory", {"content": "Ana Bel lives in Oslo."})),
        results(
            {"tool": "Retrieve_memory", "ok": True, "message": "found 0", "memories": []},
            {"tool": "Add_memory", "ok": True, "message": "stored 1 memory entry: m7"},
        ),
        # a failed Add of it names no entry
        reply(("Add_memory", {"content": "Ana Bel lives in Oslo!"})),
        results({"tool": "Add_memory", "ok": False, "message": "content has 9999 characters"}),
    ]
    assert stored_entry(conversation, "lives in Oslo") == {"memory_id": "m7", "content": "Ana Bel lives in Oslo."}
    assert stored_entry(conversation, "plays the harp") is None  # said, never stored
    # stored twice: the later entry is the one a fix overwrites
    conversation += [
        reply(("Add_memory", {"content": "Ana Bel lives in Oslo, still."})),
        results({"tool": "Add_memory", "ok": True, "message": "stored 1 memory entry: mem_0badc0de"}),
    ]
    assert stored_entry(conversation, "lives in Oslo")["memory_id"] == "mem_0badc0de"


def test_an_expert_that_skips_the_update_keeps_both_and_reads_its_best_match(qwen_tokenizer, revised):
    trajectories = play_expert(qwen_tokenizer, revised, ExpertHabits(1.0, 0.0, 1.0), paragraphs_per_turn=1)
    for trajectory, task in zip(trajectories, revised):
        (change,) = task.metadata["revisions"]
        attribute = BY_NAME[change["attribute"]]
        contents = [e["content"] for e in trajectory.final_memory]
        assert attribute.revise(change["entity"], change["new"]) in contents  # the change, stored as a fact
        assert any(attribute.state(change["entity"], change["old"]) in c for c in contents)  # beside the stale one
        assert "Update_memory" not in [c["name"] for s in trajectory.steps for c in s.tool_calls]
        # the answer is read from the retrieval's first memory about the person: old or new, as it ranked
        retrieval = trajectory.steps[-1].prompt_text.split("<tool_response>")[-1]
        assert trajectory.answer == visible_answer(task, retrieval) in (change["old"], change["new"])


def test_the_reader_takes_the_first_statement_about_the_person_old_or_new():
    (task,) = generate_synthetic_tasks(1, seed=5, revisions=1)
    (change,) = task.metadata["revisions"]
    attribute = BY_NAME[change["attribute"]]
    stale = attribute.state(change["entity"], change["old"])
    current = attribute.revise(change["entity"], change["new"])
    assert visible_answer(task, f"{stale}\n{current}") == change["old"]
    assert visible_answer(task, f"{current}\n{stale}") == change["new"]


def test_a_summarising_expert_keeps_a_long_stage_2_short_and_still_answers(qwen_tokenizer):
    long_stage_2 = {"distractors_per_task": 4, "distractor_sentences": 10}
    tasks = generate_synthetic_tasks(4, seed=6, attributes_per_entity=2, **long_stage_2)
    summarising = play_expert(qwen_tokenizer, tasks, ExpertHabits(1.0, 0.0, 1.0, summarise_context=1.0))
    growing = play_expert(qwen_tokenizer, tasks, ExpertHabits(1.0, 0.0, 1.0))
    for short, long, task in zip(summarising, growing, tasks):
        stage2 = [c["name"] for s in short.steps if s.stage == 2 for c in s.tool_calls]
        assert stage2 == ["Summary_context"] * 4  # once after each distractor, then a plain reply
        assert short.answer == long.answer == task.answer
        last_prompt = short.steps[-1].prompt_text
        assert not any(d in last_prompt for d in task.distractors)  # no distractor survives verbatim
        assert all(d in long.steps[-1].prompt_text for d in task.distractors)
        # a summary line per message (its lead sentence) instead of ten sentences
        assert short.steps[-1].context_tokens < 0.8 * long.steps[-1].context_tokens
