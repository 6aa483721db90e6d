import json

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from agemem.core.config import SummarizerConfig
from agemem.core.configlib import ConfigError
from agemem.core.context import Message
from agemem.core.summarizers import (
    SUMMARY_INSTRUCTIONS,
    ExtractiveSummarizer,
    LLMSummarizer,
    OpenAIChatClient,
    SummarizerError,
    TransformersChatGenerator,
    build_summarizer,
)
from tests.fake_endpoint import FakeChatEndpoint


def test_extractive_keeps_lead_sentences_and_renders_tool_activity():
    messages = [
        Message("user", "Paris is the capital of France. It has 2 million people."),
        Message(
            "assistant",
            '<think>x</think><tool_call>[{"name": "Add_memory", "arguments": {"content": "c"}}]</tool_call>',
        ),
        Message(
            "tool", json.dumps({"ok": True, "message": "1 memory retrieved", "memories": [{"content": "Lyon fact"}]})
        ),
        Message("assistant", "<think>y</think><answer>Noted.</answer>"),
    ]
    assert ExtractiveSummarizer().summarize(messages) == (
        "- user: Paris is the capital of France.\n"
        "- assistant: (used Add_memory)\n"
        "- tool: 1 memory retrieved; Lyon fact\n"
        "- assistant: Noted."
    )
    assert len(ExtractiveSummarizer(max_chars=20).summarize(messages)) == 20


def test_llm_summarizer_sends_instructions_and_transcript():
    prompts = []

    def generate(messages):
        prompts.append(messages)
        return "  short summary  "

    text = LLMSummarizer(generate).summarize([Message("user", "hello"), Message("assistant", "hi")])
    assert text == "short summary"
    assert prompts[0][0] == {"role": "system", "content": SUMMARY_INSTRUCTIONS}
    assert "user: hello\nassistant: hi" in prompts[0][1]["content"]
    with pytest.raises(SummarizerError, match="empty"):
        LLMSummarizer(lambda _: "   ").summarize([Message("user", "x")])


def scripted_statuses(statuses):
    """A reply function that plays ``statuses`` in order (then 200); 299 sends a 200 that is not JSON."""
    pending = list(statuses)

    def reply(body, number):
        status = pending.pop(0) if pending else 200
        return (200, b"not json") if status == 299 else (status, "served summary")

    return reply


@pytest.fixture
def endpoint_factory():
    servers = []

    def start(statuses=()):
        server = FakeChatEndpoint(scripted_statuses(statuses))
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


def test_openai_client_retries_server_errors_then_succeeds(endpoint_factory):
    server = endpoint_factory([500, 503])
    client = OpenAIChatClient(server.url, "judge-model", api_key="k", retries=3, backoff_s=0)
    assert client([{"role": "user", "content": "hi"}]) == "served summary"
    assert len(server.requests) == 3
    path, headers, body = server.requests[-1]
    assert path == "/v1/chat/completions" and headers["Authorization"] == "Bearer k"
    assert body["model"] == "judge-model" and body["messages"] == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("statuses", "attempts", "fragment"),
    [([500] * 5, 3, "HTTP 500"), ([400], 1, "HTTP 400"), ([299] * 3, 3, "unexpected response")],
)
def test_openai_client_failure_names_endpoint_and_cause(endpoint_factory, statuses, attempts, fragment):
    server = endpoint_factory(statuses)
    client = OpenAIChatClient(server.url, "m", retries=3, backoff_s=0)
    with pytest.raises(SummarizerError, match=fragment) as info:
        client([{"role": "user", "content": "hi"}])
    assert server.url in str(info.value) and len(server.requests) == attempts


def test_openai_client_unreachable_endpoint():
    client = OpenAIChatClient("http://127.0.0.1:9/v1", "m", retries=2, backoff_s=0, timeout_s=2)
    with pytest.raises(SummarizerError, match="after 2 attempt"):
        client([{"role": "user", "content": "hi"}])


def test_build_summarizer_backends(endpoint_factory):
    assert isinstance(build_summarizer(SummarizerConfig(backend="extractive")), ExtractiveSummarizer)
    with pytest.raises(ConfigError, match="policy's generate function"):
        build_summarizer(SummarizerConfig(backend="policy"))
    server = endpoint_factory()
    summarizer = build_summarizer(SummarizerConfig(backend="openai", base_url=server.url, model="m"))
    assert summarizer.summarize([Message("user", "x")]) == "served summary"


def test_policy_summarizer_with_a_tiny_local_model(qwen_tokenizer):
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(qwen_tokenizer),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=1024,
    )
    generate = TransformersChatGenerator(Qwen2ForCausalLM(config).eval(), qwen_tokenizer, max_new_tokens=6)
    summarizer = build_summarizer(SummarizerConfig(backend="policy"), policy_generate=generate)
    # A random model writes noise, but it is the policy's own text: six new tokens decoded.
    text = summarizer.summarize([Message("user", "Paris is the capital of France.")])
    assert isinstance(text, str) and text == text.strip()
