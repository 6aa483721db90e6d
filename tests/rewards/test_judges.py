import json
import re
import string
import time
from collections import Counter

import pytest
import torch

from agemem.core.httpclient import ChatClient
from agemem.core.text import normalize_answer
from agemem.rewards.base import AnswerItem, Judge, MemoryItem, RelevanceItem
from agemem.rewards.judges import (
    ANSWER_RUBRIC,
    MEMORY_RUBRIC,
    RELEVANCE_RUBRIC,
    LLMJudge,
    RuleJudge,
    TransformersJudge,
    exact_match,
    f1_score,
    judge_messages,
    parse_score,
)
from agemem.rollouts.config import PolicyConfig
from agemem.tasks.hotpotqa import load_hotpotqa
from tests.fake_endpoint import FakeChatEndpoint

# ------------------------------------------------------------------ the official hotpot_evaluate_v1.py semantics


def official_normalize_answer(s):
    def remove_articles(text):
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    def lower(text):
        return text.lower()

    return white_space_fix(remove_articles(remove_punc(lower(s))))


def official_f1_score(prediction, ground_truth):
    normalized_prediction = official_normalize_answer(prediction)
    normalized_ground_truth = official_normalize_answer(ground_truth)
    zero_metric = (0, 0, 0)
    if normalized_prediction in ["yes", "no", "noanswer"] and normalized_prediction != normalized_ground_truth:
        return zero_metric
    if normalized_ground_truth in ["yes", "no", "noanswer"] and normalized_prediction != normalized_ground_truth:
        return zero_metric
    prediction_tokens = normalized_prediction.split()
    ground_truth_tokens = normalized_ground_truth.split()
    common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return zero_metric
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    f1 = (2 * precision * recall) / (precision + recall)
    return f1, precision, recall


def official_exact_match_score(prediction, ground_truth):
    return official_normalize_answer(prediction) == official_normalize_answer(ground_truth)


def perturbations(answer):
    words = answer.split()
    swapped = {"yes": "no", "no": "yes"}.get(answer.strip().lower(), "yes")
    return [
        answer,
        answer.upper(),
        answer.lower(),
        f"The {answer}.",
        f"  {answer}!!  ",
        f"an {answer}, a thing",
        f"{answer} and also something else",
        f"it is {answer}",
        " ".join(words[: max(1, len(words) // 2)]),
        words[-1] if words else "",
        answer.replace(" ", "-"),
        answer.replace(",", ""),
        swapped,
        "noanswer",
        "",
        "the",
        "Yes.",
        f"{answer} {answer}",
    ]


@pytest.fixture(scope="module")
def hotpot_tasks():
    return load_hotpotqa("bundled:hotpotqa")


def test_em_and_f1_match_the_official_script_on_the_bundled_answers(hotpot_tasks):
    assert len(hotpot_tasks) == 100
    checked = partial = 0
    for task in hotpot_tasks:
        for prediction in perturbations(task.answer):
            expected_f1 = official_f1_score(prediction, task.answer)[0]
            expected_em = 1.0 if official_exact_match_score(prediction, task.answer) else 0.0
            assert f1_score(prediction, task.answer) == expected_f1, (prediction, task.answer)
            assert exact_match(prediction, task.answer) == expected_em, (prediction, task.answer)
            checked += 1
            partial += 0.0 < expected_f1 < 1.0
    assert checked == 100 * 18 and partial > 100  # the perturbations exercise the partial-credit path


def test_agemem_normalize_answer_is_the_official_one(hotpot_tasks):
    texts = [p for task in hotpot_tasks for p in perturbations(task.answer)] + [t.question for t in hotpot_tasks]
    texts += ["a-an-the", "an-apple", "The\tTHE\n Über—café (1999)!", "theatre anathema", "‘quoted’ “text”"]
    for text in texts:
        assert normalize_answer(text) == official_normalize_answer(text), text


def test_hand_computed_f1_examples():
    # pred "the eiffel tower in paris" -> [eiffel, tower, in, paris]; gold "Eiffel Tower" -> [eiffel, tower]
    # k = 2, P = 2/4, R = 2/2, F1 = 2 * 0.5 * 1 / 1.5 = 2/3
    assert f1_score("the Eiffel Tower in Paris", "Eiffel Tower") == pytest.approx(2 / 3)
    # pred [new, york, city], gold [york, new, york]: multiset overlap {new: 1, york: 1}, k = 2
    # P = 2/3, R = 2/3, F1 = 2/3
    assert f1_score("New York City", "York, New York") == pytest.approx(2 / 3)
    # yes/no special case: "yes" vs "yes sir" differ after normalisation -> 0 although one token overlaps
    assert f1_score("yes", "yes sir") == 0.0 and f1_score("Yes!", "yes") == 1.0
    # no overlap -> 0; only articles/punctuation -> empty normalised strings: EM 1, F1 0 (official behaviour)
    assert f1_score("Lyon", "Paris") == 0.0
    assert exact_match("The.", "a") == 1.0 and f1_score("The.", "a") == 0.0
    assert exact_match("  The  Beatles!", "beatles") == 1.0 and exact_match("Beatles", "Rolling Stones") == 0.0


def test_rule_judge_answer_metric():
    items = [
        AnswerItem("q", "the Eiffel Tower in Paris", "Eiffel Tower"),
        AnswerItem("q", "Eiffel tower.", "Eiffel Tower"),
    ]
    assert RuleJudge().answer_scores(items) == pytest.approx([2 / 3, 1.0])
    assert RuleJudge(answer_metric="em").answer_scores(items) == [0.0, 1.0]
    assert isinstance(RuleJudge(), Judge)
    with pytest.raises(ValueError):
        RuleJudge(answer_metric="bleu")
    with pytest.raises(ValueError, match="encoder"):
        RuleJudge(relevance="cosine")


FACTS = (
    "Marie Curie was born in Warsaw in 1867.",  # content words: marie curie born warsaw 1867 (5)
    "She won the Nobel Prize in Physics.",  # content words: won nobel prize physics (4; 'she' is a stopword)
)


def test_rule_judge_memory_recall_by_hand():
    items = [
        MemoryItem("Curie: born 1867 in Warsaw", FACTS),  # fact 1: curie born 1867 warsaw = 4/5; fact 2: 0/4
        MemoryItem("Nobel prize (physics) winner Marie", FACTS),  # fact 1: marie = 1/5; fact 2: nobel prize physics 3/4
        MemoryItem("unrelated cooking note", FACTS),  # 0
        MemoryItem("anything", ()),  # no supporting facts -> 0
        MemoryItem("anything", ("the", "...")),  # both facts normalise to no tokens at all: unusable -> 0
        MemoryItem("it was there", ("It was.",)),  # all stopwords: all tokens kept, {it, was} 2/2 -> 1
    ]
    assert RuleJudge().memory_scores(items) == pytest.approx([0.8, 0.75, 0.0, 0.0, 0.0, 1.0])
    # a threshold binarises: 0.8 >= 0.78 -> 1, 0.75 < 0.78 -> 0
    assert RuleJudge(memory_recall_threshold=0.78).memory_scores(items[:3]) == [1.0, 0.0, 0.0]


def test_rule_judge_memory_blends_embedding_cosine(word_encoder):
    # WordSetEncoder: cos = |A ∩ B| / sqrt(|A| |B|) over raw lower-case word sets.
    # entry {curie, born, 1867, in, warsaw} (5), fact 1 {marie, curie, was, born, in, warsaw, 1867} (7):
    # overlap 5 -> cos = 5 / sqrt(35); recall (content words) = 4/5
    # fact 2 {she, won, the, nobel, prize, in, physics} (7): overlap {in} -> cos = 1 / sqrt(35); recall 0
    item = MemoryItem("Curie: born 1867 in Warsaw", FACTS)
    judge = RuleJudge(word_encoder, embedding_weight=0.25)
    fact1 = 0.75 * 0.8 + 0.25 * 5 / 35**0.5
    fact2 = 0.75 * 0.0 + 0.25 * 1 / 35**0.5
    assert judge.memory_scores([item]) == pytest.approx([max(fact1, fact2)])
    assert word_encoder.calls == 1  # one encoder call per batch


def test_rule_judge_relevance_recall_and_cosine(word_encoder):
    # question content words: {marie, curie, born} ('where', 'was' are stopwords) -> 3
    items = [
        RelevanceItem("Where was Marie Curie born?", ("Curie was born in Warsaw.", "Paris is big.")),  # 2/3, 0/3
        RelevanceItem("Where was Marie Curie born?", ()),  # empty retrieval -> 0
        RelevanceItem("Where was Marie Curie born?", ("Marie Curie, born where?",)),  # 3/3
    ]
    assert RuleJudge().relevance_scores(items) == pytest.approx([2 / 3, 0.0, 1.0])
    assert RuleJudge(relevance_threshold=0.7).relevance_scores(items) == [0.0, 0.0, 1.0]
    # cosine: q {where, was, marie, curie, born} (5) vs r1 {curie, was, born, in, warsaw} (5): overlap 3 -> 3/5
    # vs r2 {paris, is, big}: 0; vs r3 {marie, curie, born, where}: overlap 4 -> 4 / sqrt(20)
    cosine = RuleJudge(word_encoder, relevance="cosine").relevance_scores(items)
    assert cosine == pytest.approx([0.6, 0.0, 4 / 20**0.5])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0.8", 0.8),
        ("Score: 0.8", 0.8),
        ("score=0.25", 0.25),
        ("8/10", 0.8),
        ("80%", 0.8),
        ("4 out of 5", 0.8),
        ("Score: 3 / 4", 0.75),
        ("1", 1.0),
        ("0", 0.0),
        (".5", 0.5),
        ("12/10", 1.0),  # clipped
        ("150%", 1.0),  # clipped
        ("The note names 2 of the facts. Score: 0.4", 0.4),  # the labelled number wins
        ("<think>maybe 0.1</think>Score: 0.9", 0.9),  # reasoning is ignored
        ("Score: 7", None),  # no scale
        ("1990", None),
        ("3/0", None),
        ("I cannot judge this.", None),
        ("", None),
    ],
)
def test_parse_score(text, expected):
    assert parse_score(text) == (pytest.approx(expected) if expected is not None else None)


def test_judge_messages_carry_rubric_and_item():
    answer = judge_messages("answer", AnswerItem("Who?", "Curie", "Marie Curie"))
    assert answer[0] == {"role": "system", "content": ANSWER_RUBRIC}
    assert "Reference answer: Marie Curie" in answer[1]["content"] and "Predicted answer: Curie" in answer[1]["content"]
    memory = judge_messages("memory", MemoryItem("note text", FACTS))
    assert memory[0]["content"] == MEMORY_RUBRIC and f"- {FACTS[1]}" in memory[1]["content"]
    relevance = judge_messages("relevance", RelevanceItem("Q?", ("m1", "m2")))
    assert relevance[0]["content"] == RELEVANCE_RUBRIC and "1. m1\n2. m2" in relevance[1]["content"]
    with pytest.raises(ValueError):
        judge_messages("style", None)


# ------------------------------------------------------------------ LLM judge over a loopback server


@pytest.fixture
def endpoint():
    servers = []

    def start(reply):
        server = FakeChatEndpoint(reply)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


def predicted_score(body, n):
    """Replies with the score written in the prediction ('... p=0.3'), after a staggered delay."""
    match = re.search(r"p=([0-9.]+)", body["messages"][1]["content"])
    time.sleep(0.02 * (5 - int(float(match.group(1)) * 10) % 5))  # later items finish first
    return 200, f"Score: {match.group(1)}"


def answer_items(n):
    return [AnswerItem("q?", f"guess p=0.{i}", "gold") for i in range(n)]


def test_llm_judge_sends_model_and_rubric_and_keeps_order_under_concurrency(endpoint):
    server = endpoint(predicted_score)
    judge = LLMJudge(ChatClient(server.url, "judge-m", api_key="k", backoff_s=0), concurrency=4)
    assert isinstance(judge, Judge) and judge.name == "llm:judge-m"
    assert judge.answer_scores(answer_items(8)) == pytest.approx([i / 10 for i in range(8)])
    assert len(server.requests) == 8
    path, headers, body = server.requests[0]
    assert path == "/v1/chat/completions" and headers["Authorization"] == "Bearer k"
    assert body["model"] == "judge-m" and body["temperature"] == 0.0
    assert body["messages"][0] == {"role": "system", "content": ANSWER_RUBRIC}
    assert judge.counters == {"requests": 8, "cache_hits": 0, "errors": 0, "unparsable": 0, "fallbacks": 0}


def test_llm_judge_cache_avoids_a_second_request(endpoint, tmp_path):
    server = endpoint(lambda body, n: (200, "0.7"))
    items = [MemoryItem("note", FACTS), MemoryItem("other note", FACTS)]
    first = LLMJudge(ChatClient(server.url, "m", backoff_s=0), cache_dir=tmp_path)
    assert first.memory_scores(items) == [0.7, 0.7] and len(server.requests) == 2
    assert len(list(tmp_path.glob("*.json"))) == 2 and not list(tmp_path.glob("*.tmp"))
    second = LLMJudge(
        ChatClient(server.url, "m", backoff_s=0), cache_dir=tmp_path
    )  # a fresh judge reads the disk cache
    assert second.memory_scores(items) == [0.7, 0.7] and len(server.requests) == 2
    assert second.counters["cache_hits"] == 2 and second.counters["requests"] == 0
    other_model = LLMJudge(ChatClient(server.url, "m2", backoff_s=0), cache_dir=tmp_path)  # the key includes the model
    other_model.memory_scores(items[:1])
    assert len(server.requests) == 3
    # every setting that changes the reply is in the key: each of these asks the endpoint again
    for client in (
        ChatClient(server.url, "m", max_tokens=8, backoff_s=0),
        ChatClient(server.url, "m", temperature=0.7, backoff_s=0),
    ):
        before = len(server.requests)
        LLMJudge(client, cache_dir=tmp_path).memory_scores(items[:1])
        assert len(server.requests) == before + 1


def test_judge_cache_dir_auto_is_the_users_cache_and_empty_is_none(tmp_path, monkeypatch):
    from agemem.rewards.build import judge_cache_dir
    from agemem.rewards.config import JudgeConfig

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert judge_cache_dir(JudgeConfig(cache_dir="auto")) == tmp_path / "xdg" / "agemem" / "judge"
    assert judge_cache_dir(JudgeConfig(cache_dir="")) is None
    assert judge_cache_dir(JudgeConfig(cache_dir=str(tmp_path / "mine"))) == tmp_path / "mine"


def test_llm_judge_retries_a_503(endpoint):
    server = endpoint(lambda body, n: (503, "") if n == 1 else (200, "4 out of 5"))
    judge = LLMJudge(ChatClient(server.url, "m", retries=3, backoff_s=0))
    assert judge.relevance_scores([RelevanceItem("q", ("m",))]) == [0.8]
    assert len(server.requests) == 2 and judge.counters["fallbacks"] == 0


def test_llm_judge_falls_back_to_rules_when_the_endpoint_is_down(endpoint):
    server = endpoint(lambda body, n: (200, "1"))
    url = server.url
    server.close()  # nothing listens any more: connection refused
    rule = RuleJudge()
    judge = LLMJudge(ChatClient(url, "m", retries=2, backoff_s=0), fallback=rule, concurrency=2)
    answers = [AnswerItem("q", "the Eiffel Tower in Paris", "Eiffel Tower"), AnswerItem("q", "Lyon", "Paris")]
    memories = [MemoryItem("Curie: born 1867 in Warsaw", FACTS)]
    relevance = [RelevanceItem("Where was Marie Curie born?", ("Curie was born in Warsaw.",))]
    assert judge.answer_scores(answers) == rule.answer_scores(answers)
    assert judge.memory_scores(memories) == rule.memory_scores(memories)
    assert judge.relevance_scores(relevance) == rule.relevance_scores(relevance)
    assert judge.counters == {"requests": 4, "cache_hits": 0, "errors": 4, "unparsable": 0, "fallbacks": 4}


def test_llm_judge_unparsable_reply_goes_to_the_fallback(endpoint, tmp_path):
    server = endpoint(lambda body, n: (200, "Score: 0.9" if "p=0.9" in json.dumps(body) else "It is hard to say."))
    judge = LLMJudge(ChatClient(server.url, "m", backoff_s=0), cache_dir=tmp_path)
    items = [AnswerItem("q", "Paris p=0.9", "Paris"), AnswerItem("q", "the Eiffel Tower in Paris", "Eiffel Tower")]
    assert judge.answer_scores(items) == pytest.approx([0.9, 2 / 3])
    assert judge.counters["unparsable"] == 1 and judge.counters["fallbacks"] == 1 and judge.counters["errors"] == 0


# ------------------------------------------------------------------ transformers judge


class ScriptedGenerate:
    """Stands in for ``model.generate``: appends the tokens of a scripted reply to the prompt."""

    def __init__(self, tokenizer, replies):
        self.tokenizer = tokenizer
        self.replies = list(replies)
        self.calls = []

    def __call__(self, input_ids, **kwargs):
        self.calls.append(kwargs)
        reply_ids = self.tokenizer(self.replies.pop(0), add_special_tokens=False)["input_ids"]
        return torch.cat([input_ids, torch.tensor([reply_ids], dtype=input_ids.dtype)], dim=1)


@pytest.fixture(scope="module")
def tiny_policy():
    from agemem.rollouts.policy import load_policy

    return load_policy(PolicyConfig(device="cpu"))


def test_transformers_judge_parses_the_generated_score(tiny_policy, monkeypatch):
    model, tokenizer = tiny_policy
    scripted = ScriptedGenerate(tokenizer, ["Score: 0.6", "3/4"])
    monkeypatch.setattr(model, "generate", scripted)
    judge = TransformersJudge(model, tokenizer, max_new_tokens=8)
    assert isinstance(judge, Judge) and judge.name.startswith("transformers:")
    assert judge.memory_scores([MemoryItem("n", FACTS), MemoryItem("m", FACTS)]) == [0.6, 0.75]
    assert all(call["max_new_tokens"] == 8 and call["do_sample"] is False for call in scripted.calls)
    assert judge.counters["requests"] == 2 and judge.counters["fallbacks"] == 0


def test_transformers_judge_garbage_goes_to_the_fallback(tiny_policy, monkeypatch):
    model, tokenizer = tiny_policy
    monkeypatch.setattr(model, "generate", ScriptedGenerate(tokenizer, ["no idea", "Score: 1"]))
    rule = RuleJudge()
    judge = TransformersJudge(model, tokenizer, fallback=rule)
    items = [AnswerItem("q", "the Eiffel Tower in Paris", "Eiffel Tower"), AnswerItem("q", "x", "y")]
    assert judge.answer_scores(items) == pytest.approx([2 / 3, 1.0])
    assert judge.counters["unparsable"] == 1 and judge.counters["fallbacks"] == 1


def test_transformers_judge_runs_the_real_tiny_model(tiny_policy):
    model, tokenizer = tiny_policy
    judge = TransformersJudge(model, tokenizer, max_new_tokens=4)
    items = [RelevanceItem("Where was Marie Curie born?", ("Curie was born in Warsaw.",))]
    (score,) = judge.relevance_scores(items)
    assert 0.0 <= score <= 1.0 and judge.counters["requests"] == 1
    # a random model rarely writes a score; whatever it wrote, either it parsed or the rule judge answered
    assert judge.counters["fallbacks"] == judge.counters["unparsable"] <= 1
