"""train.logprob_head and train.adamw_impl: fp32 logits whatever autocast says, the kernels AdamW gets, and what
the plan counts for each (GPU measurements: docs/training.md#lm-head-precision, bench/results/gpu_h200_*.json)."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch.nn import functional

from agemem.train.loop import adamw_kernels
from agemem.train.plan import plan_memory
from agemem.train.policy import TokenLogprobs, chosen_token_logprobs, fp32_matmul_precision, head_logits_fp32
from tests.train.test_plan import by_name, paper_config

VOCAB, WIDTH, ROWS = 4099, 48, 37  # a vocabulary wide enough that bf16 rounding of the logits shows


def _head(dtype: torch.dtype, seed: int = 0) -> nn.Linear:
    torch.manual_seed(seed)
    head = nn.Linear(WIDTH, VOCAB, bias=False, dtype=dtype)
    nn.init.normal_(head.weight, std=0.5)  # logits of a few units: bf16 rounds them to ~1/64 or coarser
    return head


def test_fp32_head_is_exact_fp32_under_autocast():
    head, hidden = _head(torch.float32), torch.randn(ROWS, WIDTH)
    exact = functional.linear(hidden.double(), head.weight.double())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        plain = head(hidden)  # autocast's: bf16 operands and output
        ours = head_logits_fp32(head, hidden)
    assert plain.dtype == torch.bfloat16 and ours.dtype == torch.float32
    assert (ours.double() - exact).abs().max() < 1e-4
    assert (plain.double() - exact).abs().max() > 1e-2  # what the fp32 head removes: the bf16 output rounding


def test_half_weight_is_cast_and_its_gradient_flows_back_in_its_dtype():
    head, hidden = _head(torch.bfloat16), torch.randn(ROWS, WIDTH, requires_grad=True)
    targets = torch.randint(0, VOCAB, (ROWS,))
    logits = head_logits_fp32(head, hidden)
    assert logits.dtype == torch.float32
    reference = functional.linear(hidden.detach().double(), head.weight.detach().double())
    assert (logits.double() - reference).abs().max() < 1e-4  # fp32 products of the bf16 weight's exact values
    chosen_token_logprobs(logits, targets, temperature=1.0).sum().backward()
    assert head.weight.grad is not None and head.weight.grad.dtype == torch.bfloat16
    assert hidden.grad is not None and hidden.grad.abs().sum() > 0


def test_float64_stays_float64():
    head = nn.Linear(WIDTH, VOCAB, bias=True, dtype=torch.float64)
    hidden = torch.randn(ROWS, WIDTH, dtype=torch.float64)
    logits = head_logits_fp32(head, hidden)
    assert logits.dtype == torch.float64  # "at least fp32": never a downcast
    assert torch.equal(logits, head(hidden))


class _WrappedHead(nn.Linear):
    """Stands for a head whose weight is not plain (a LoRA-wrapped or ZeRO-3 partitioned one): the module call."""

    calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        type(self).calls += 1
        return super().forward(x)


def test_a_head_that_is_not_a_plain_linear_keeps_its_module_call():
    head = _WrappedHead(WIDTH, 11)
    hidden = torch.randn(3, WIDTH)
    out = head_logits_fp32(head, hidden)
    assert _WrappedHead.calls == 1 and out.dtype == torch.float32
    # a ZeRO-3 partition: the weight is empty outside the module's forward (whose hooks gather it)
    partitioned = nn.Linear(WIDTH, 11)
    partitioned.weight = nn.Parameter(torch.empty(0))
    gathered = torch.randn(11, WIDTH)
    # stands for the forward whose hooks gather the weight
    partitioned.forward = lambda x: functional.linear(x, gathered).to(torch.bfloat16)
    out = head_logits_fp32(partitioned, hidden)
    assert out.dtype == torch.float32
    assert torch.equal(out, functional.linear(hidden, gathered).to(torch.bfloat16).float())


class _TinyLM(nn.Module):
    """Decoder = an embedding; head = a Linear: enough for TokenLogprobs' chunked path."""

    def __init__(self, head: nn.Linear):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.head = head

    def get_decoder(self):
        embed = self.embed

        class Decoder(nn.Module):
            def forward(self, input_ids, attention_mask):
                return type("Out", (), {"last_hidden_state": embed(input_ids)})()

        return Decoder()

    def get_output_embeddings(self) -> nn.Linear:
        return self.head


def test_token_logprobs_head_setting_changes_only_the_logits_precision():
    torch.manual_seed(1)
    lm = _TinyLM(_head(torch.float32))
    ids = torch.randint(0, VOCAB, (2, 9))
    mask = torch.ones_like(ids)
    rows, cols = torch.tensor([0, 0, 1, 1, 1]), torch.tensor([1, 5, 2, 3, 8])
    with torch.no_grad():
        fp32 = TokenLogprobs(lm, chunk=2)(ids, mask, rows, cols)  # no autocast: the truth
        with torch.autocast("cpu", dtype=torch.bfloat16):
            ours = TokenLogprobs(lm, chunk=2, head_fp32=True)(ids, mask, rows, cols)
            theirs = TokenLogprobs(lm, chunk=2, head_fp32=False)(ids, mask, rows, cols)
    # the embedding decoder is exact under autocast: the fp32 head leaves nothing but fp32 rounding
    assert (ours - fp32).abs().max() < 1e-4
    assert (theirs - fp32).abs().max() > 1e-3


@pytest.mark.parametrize(
    ("head", "compute", "device", "expected"),
    [
        ("fp32", "bf16", "cuda", "high"),  # TF32: the head's fp32 output at ~half the bf16 rate
        ("fp32", "fp16", "cuda", "high"),
        ("fp32", "no", "cuda", "highest"),  # an fp32 run stays exact
        ("autocast", "bf16", "cuda", "highest"),
        ("fp32", "bf16", "cpu", "highest"),  # no TF32 on a CPU
    ],
)
def test_fp32_matmul_precision(head, compute, device, expected):
    assert fp32_matmul_precision(head, compute, device) == expected


def test_adamw_kernels_by_setting_and_device():
    assert adamw_kernels("auto", torch.device("cuda", 0)) == {"fused": True}
    assert adamw_kernels("auto", "cpu") == {}  # torch's default, which the CPU tests' numbers used
    assert adamw_kernels("fused", "cpu") == {"fused": True}
    assert adamw_kernels("foreach", "cuda") == {"foreach": True}
    assert adamw_kernels("for_loop", "cuda") == {"foreach": False}
    # each is a valid AdamW: one step on a CPU parameter with each (fused runs on CPU too)
    for impl in ("auto", "fused", "foreach", "for_loop"):
        param = nn.Parameter(torch.ones(3))
        optimizer = torch.optim.AdamW([param], lr=0.1, **adamw_kernels(impl, "cpu"))
        param.sum().backward()
        optimizer.step()
        # first AdamW step moves each weight by lr (m̂/sqrt(v̂) = 1) after decay 1 - lr*0.01: 1*0.999 - 0.1
        assert torch.allclose(param.detach(), torch.full((3,), 0.899), atol=1e-6)


def test_plan_counts_the_foreach_step_temporary():
    fused = plan_memory(paper_config(), zero=0, gpus=1)
    foreach = plan_memory(paper_config("train.adamw_impl=foreach"), zero=0, gpus=1)
    loop = plan_memory(paper_config("train.adamw_impl=for_loop"), zero=0, gpus=1)
    trainable = fused.params.trainable
    assert by_name(fused)["AdamW step temporary"] == 0
    # foreach: sqrt(v) of every trainable weight at once, fp32: 4 x trainable bytes, at the step only
    assert by_name(foreach)["AdamW step temporary"] == 4 * trainable
    assert foreach.phases["step"] - fused.phases["step"] == 4 * trainable
    assert foreach.phases["backward"] == fused.phases["backward"]
    # for_loop: one tensor at a time, the largest (the embedding) or every trainable weight if fewer
    assert by_name(loop)["AdamW step temporary"] == 4 * min(fused.params.largest_module, trainable)
    # under ZeRO-2 the optimizer steps one flat partition: 4 x ceil(trainable / N)
    zero2 = plan_memory(paper_config("train.adamw_impl=foreach"), zero=2, gpus=8)
    assert by_name(zero2)["AdamW step temporary"] == 4 * math.ceil(zero2.params.trainable / 8)


def test_plan_counts_the_fp32_head_copy_only_where_the_head_is_half():
    autocast = plan_memory(paper_config("train.logprob_head=autocast"), zero=2, gpus=8)
    fp32 = plan_memory(paper_config(), zero=2, gpus=8)
    head = fp32.model.vocab_size * fp32.model.hidden_size
    # DeepSpeed's bf16 head, trained: its fp32 copy and fp32 gradient, 8 bytes a weight
    assert fp32.activations.logits_chunk - autocast.activations.logits_chunk == 8 * head
    # plain accelerate: the head is an fp32 master weight already, nothing to copy
    ddp32, ddp16 = (plan_memory(paper_config(f"train.logprob_head={h}"), zero=0, gpus=1) for h in ("fp32", "autocast"))
    assert ddp32.activations.logits_chunk == ddp16.activations.logits_chunk
