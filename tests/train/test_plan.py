"""The memory plan (train/plan.py, `agemem plan` / `agemem train --dry-run`): parameter counts against the
published ones and transformers' own modules, hand-computed per-GPU figures under ZeRO-2 / ZeRO-3 / DDP / LoRA,
the verdict, the CLI on the shipped configs, DeepSpeed's estimator, and errors that name the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from agemem.core.configlib import load_config
from agemem.entrypoints.cli import main
from agemem.entrypoints.roots import AgeMemConfig
from agemem.rollouts.config import PolicyConfig
from agemem.train import model_size
from agemem.train import plan as plan_module
from agemem.train.config import LoRAConfig
from agemem.train.model_size import PlanError, count_parameters, dims_from_config, resolve_model_dims
from agemem.train.parallelism import read_accelerate_config
from agemem.train.plan import GIB, deepspeed_formula, plan_memory

REPO = Path(__file__).resolve().parents[2]
QWEN25_7B = "Qwen/Qwen2.5-7B-Instruct"
PSI_7B = 7_615_616_512  # Qwen2.5-7B, derived in test_published_parameter_counts
EMBED_7B = 152064 * 3584  # 544,997,376: the largest module (embed_tokens; lm_head is as large, untied)

# the paper's 7B run, spelled out so the figures below do not move when configs/ is edited
PAPER_7B = [
    f"policy.model={QWEN25_7B}",
    "policy.dtype=bfloat16",
    "policy.attn_implementation=flash_attention_2",
    "engine.backend=vllm",
    "engine.vllm.mode=colocate",
    "engine.vllm.gpu_memory_utilization=0.35",
    "engine.vllm.max_model_len=12288",
    "rollout.max_prompt_tokens=10240",
    "sampling.max_tokens=2048",
    "grpo.beta=0.1",
    "train.micro_batch_tokens=32768",
    "train.gradient_checkpointing=true",
    "train.mixed_precision=bf16",
    "train.logprob_chunk_tokens=1024",
    "lora.enabled=false",
]


def paper_config(*overrides: str) -> AgeMemConfig:
    return load_config(AgeMemConfig, None, [*PAPER_7B, *overrides])


def by_name(plan) -> dict[str, int]:
    return {c.name: c.bytes for c in plan.components}


# ------------------------------------------------------------------------------------------------ parameter counts


def test_published_parameter_counts():
    # Qwen2.5-7B: embedding 152064 x 3584 = 544,997,376, untied lm_head the same; a layer:
    #   q 3584x3584 + 3584 bias, k and v 3584x512 + 512 bias (4 kv heads x 128), o 3584x3584,
    #   MLP 3 x 3584 x 18944 = 203,685,888, norms 2 x 3584  -> 233,057,792
    # total = 2 x 544,997,376 + 28 x 233,057,792 + 3584 = 7,615,616,512 (published 7.62B; non-embedding 6.53B)
    qwen25 = count_parameters(resolve_model_dims(PolicyConfig(model=QWEN25_7B)))
    assert qwen25.per_layer == 233_057_792
    assert qwen25.total == PSI_7B
    assert round(qwen25.total / 1e9, 2) == 7.62
    assert round((qwen25.total - qwen25.embedding - qwen25.lm_head) / 1e9, 2) == 6.53
    assert qwen25.largest_module == EMBED_7B
    # Qwen3-4B: tied embedding 151936 x 2560 = 388,956,160; a layer: q 2560x4096 (32 heads x 128), k and v
    #   2560x1024, o 4096x2560, MLP 3 x 2560 x 9728, norms 2 x 2560, q/k norms 2 x 128  -> 100,930,816
    # total = 388,956,160 + 36 x 100,930,816 + 2560 = 4,022,468,096 (published 4.02B)
    for name in ("Qwen/Qwen3-4B-Instruct-2507", "Qwen/Qwen3-4B"):
        qwen3 = count_parameters(resolve_model_dims(PolicyConfig(model=name)))
        assert qwen3.per_layer == 100_930_816
        assert qwen3.total == 4_022_468_096
        assert round(qwen3.total / 1e9, 2) == 4.02


@pytest.mark.parametrize("name", [QWEN25_7B, "Qwen/Qwen3-4B-Instruct-2507"])
def test_counts_match_transformers_modules(name):
    """The same dims built by transformers on the meta device (no memory, no weights): every parameter counted
    once (tied ones too, as DeepSpeed's model_to_params does), and its largest module."""
    from transformers import AutoConfig, AutoModelForCausalLM

    raw = dict(model_size.BUILTIN_DIMS[name.lower()])
    config = AutoConfig.for_model(raw.pop("model_type"), **raw)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    unique = {id(p): p.numel() for p in model.parameters()}
    largest = max(sum(p.numel() for p in m.parameters(recurse=False)) for m in model.modules())
    counts = count_parameters(resolve_model_dims(PolicyConfig(model=name)))
    assert counts.total == sum(unique.values())
    assert counts.largest_module == largest


def test_tiny_model_count_matches_the_built_model():
    from agemem.rollouts.policy import load_policy

    policy = PolicyConfig()
    model, _ = load_policy(policy)
    built = sum({id(p): p.numel() for p in model.parameters()}.values())
    dims = resolve_model_dims(policy)
    assert dims.source.startswith("policy.tiny_*")
    assert count_parameters(dims).total == built


def test_lora_adapter_count_matches_peft():
    # r x (in + out) per adapted projection, per layer; Qwen2.5-7B, r = 16, all seven projections:
    #   16 x [(3584+3584) + 2 x (3584+512) + (3584+3584) + 2 x (3584+18944) + (18944+3584)] = 1,441,792 a layer
    #   x 28 layers = 40,370,176 (what peft prints for this model)
    dims = resolve_model_dims(PolicyConfig(model=QWEN25_7B))
    counts = count_parameters(dims, LoRAConfig(enabled=True, r=16))
    assert counts.lora == counts.trainable == 40_370_176
    assert counts.total == PSI_7B + 40_370_176 and counts.frozen == PSI_7B
    # and peft on a small model of the same architecture agrees
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen2Config, Qwen2ForCausalLM

    small = {"vocab_size": 1000, "hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 3,
             "num_attention_heads": 4, "num_key_value_heads": 2, "model_type": "qwen2"}  # fmt: skip
    lora = LoRAConfig(enabled=True, r=4, target_modules=["q_proj", "v_proj", "down_proj"])
    model = get_peft_model(
        Qwen2ForCausalLM(Qwen2Config(**small)), LoraConfig(r=4, target_modules=list(lora.target_modules))
    )
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert count_parameters(dims_from_config(small, "small", "test"), lora).lora == trainable


# ------------------------------------------------------------------------------------------- hand-computed plans


def test_zero2_on_8x80_by_hand():
    # Ψ = 7,615,616,512; N = 8; Ψ/N = 951,952,064 exactly. DeepSpeed ZeRO-2 with bf16:
    #   weights    2Ψ          = 15,231,233,024  bf16 module, replicated on every rank
    #   gradients  2Ψ/N        =  1,903,904,128  bf16 partition (reduce-scattered bucket by bucket)
    #   bucket     2 x 5e8     =  1,000,000,000  the reduce bucket (reduce_bucket_size, DeepSpeed's default)
    #   optimizer  12Ψ/N       = 11,423,424,768  fp32 master + AdamW m + v
    #   fp32 grad  4Ψ/N        =  3,807,808,256  the partition's gradient cast to fp32 at the optimizer step
    #   reference  2Ψ          = 15,231,233,024  a stage-0 DeepSpeed engine (ZeRO-1/2 shard optimizer state only)
    #   vLLM       0.35 x 80 GiB = 30,064,771,072
    plan = plan_memory(paper_config(), zero=2, gpus=8, gpu_memory_gib=80)
    got = by_name(plan)
    assert got["weights"] == 15_231_233_024
    assert got["gradients"] == 1_903_904_128
    assert got["reduce bucket"] == 1_000_000_000
    assert got["optimizer"] == 11_423_424_768
    assert got["fp32 gradient at step"] == 3_807_808_256
    assert got["reference"] == 15_231_233_024
    assert got["vLLM"] == 30_064_771_072
    # activations, 32,768 tokens, gradient checkpointing (h 3584, q 3584, kv 512, a 28 heads, i 18944, L 28):
    #   per layer per token 16h + 4q + 4kv + 4a + 8i = 57,344 + 14,336 + 2,048 + 112 + 151,552 = 225,392 B
    #   stored: layer inputs L x T x 2h = 28 x 32,768 x 7,168 = 6,576,668,672
    #           + final norm / head input T x (4h + 4h) = 939,524,096
    #   working: max(one layer T x 225,392 = 7,385,645,056, logits chunk 16 x 1024 x 152,064 = 2,491,416,576
    #            + the fp32 head copy and its fp32 gradient (train.logprob_head=fp32 over DeepSpeed's bf16 head)
    #              8 x 152,064 x 3,584 = 4,359,979,008, in all 6,851,395,584)
    assert plan.activations.per_token_layer == 225_392
    assert got["activations"] == 6_576_668_672 + 939_524_096 + 7_385_645_056
    assert plan.activations.logits_chunk == 6_851_395_584
    assert got["AdamW step temporary"] == 0  # fused on a GPU (train.adamw_impl auto)
    assert plan.activations.logits_unchunked == 4 * 32768 * 152064  # what the chunking avoids (18.6 GiB)
    # phases: the backward holds everything but the step's fp32 gradient; vLLM stays awake (no sleep mode)
    reserve = int(1.5 * GIB)
    backward = sum(got.values()) - got["fp32 gradient at step"]
    assert plan.phases["backward"] == backward
    assert plan.phases["step"] == sum(got.values()) - got["reduce bucket"] - got["activations"]
    assert plan.peak_phase == "backward" and plan.peak == backward
    assert abs(backward / GIB - 85.09) < 0.01 and got["runtime reserve"] == reserve
    assert not plan.fits and plan.headroom == 80 * GIB - backward
    # model states at the step 2Ψ + 2Ψ/N + 12Ψ/N + 4Ψ/N = 2Ψ + 18Ψ/N: deepspeed 0.19.8's own ZeRO-2 formula
    assert plan.model_states == 2 * PSI_7B + 18 * PSI_7B // 8
    assert deepspeed_formula(plan.params, plan.parallelism)[0] == 2 * PSI_7B + 18 * PSI_7B // 8


def test_zero3_on_8x80_by_hand():
    # ZeRO-3 partitions the parameters too (Ψ/N = 951,952,064; L = the embedding, 544,997,376):
    #   weights    2Ψ/N                       =  1,903,904,128
    #   gathered   2 x (2L + 5e7 prefetch)    =  2,279,989,504  the largest module's bf16 weights + gradient
    #   gradients  2Ψ/N                       =  1,903,904,128  grad_partitions_flat_buffer (bf16), persistent
    #   bucket     2 x 5e8                    =  1,000,000,000
    #   optimizer  12Ψ/N                      = 11,423,424,768
    #   fp32 grad  4 x min(Ψ/N, 1e9 sub_group) =  3,807,808,256
    #   reference  2Ψ/N                       =  1,903,904,128  a stage-3 inference engine
    plan = plan_memory(paper_config(), zero=3, gpus=8, gpu_memory_gib=80)
    got = by_name(plan)
    assert got["weights"] == 1_903_904_128
    assert got["gathered for compute"] == 2 * (2 * EMBED_7B + 50_000_000) == 2_279_989_504
    assert got["gradients"] == 1_903_904_128
    assert got["reduce bucket"] == 1_000_000_000
    assert got["optimizer"] == 11_423_424_768
    assert got["fp32 gradient at step"] == 3_807_808_256
    assert got["reference"] == 1_903_904_128
    assert plan.fits and plan.peak_phase == "backward"
    assert abs(plan.peak / GIB - 62.39) < 0.01
    # DeepSpeed's ZeRO-3 formula: 4L + 18Ψ/N = 2,179,989,504 + 17,135,137,152 (it has no bf16 gradient
    # partition and no buckets, and counts the gathered layer with the step-time states)
    assert deepspeed_formula(plan.params, plan.parallelism)[0] == 4 * EMBED_7B + 18 * PSI_7B // 8
    # ours at the step: 2Ψ/N + 2Ψ/N + bucket + 12Ψ/N + 4Ψ/N
    assert plan.model_states == 20 * PSI_7B // 8 + 1_000_000_000


def test_ddp_full_fine_tune_is_fp32_and_does_not_fit():
    # no DeepSpeed: fp32 trainable weights 4Ψ, fp32 .grad 4Ψ + DDP buckets 4Ψ, AdamW 8Ψ, bf16 autocast casts 2Ψ
    plan = plan_memory(paper_config(), zero=0, gpus=8, gpu_memory_gib=80)
    got = by_name(plan)
    assert got["weights"] == 4 * PSI_7B
    assert got["gradients"] == 8 * PSI_7B
    assert got["optimizer"] == 8 * PSI_7B
    assert got["autocast weight copies"] == 2 * PSI_7B
    assert got["reference"] == 2 * PSI_7B  # policy.dtype=bfloat16
    assert not plan.fits
    assert plan.deepspeed.bytes is None and "DDP" in plan.deepspeed.note


def test_lora_plan():
    lora = ("lora.enabled=true", "lora.r=16")
    # ZeRO-2: the bf16 module (base + adapters) replicated; adapters' gradient and optimizer partitioned;
    # no reference copy (the base with adapters disabled is the reference)
    adapters = 40_370_176
    plan = plan_memory(paper_config(*lora), zero=2, gpus=8, gpu_memory_gib=80)
    got = by_name(plan)
    assert got["weights"] == 2 * (PSI_7B + adapters)
    assert got["gradients"] == 2 * adapters // 8
    assert got["optimizer"] == 12 * adapters // 8
    assert got["reference"] == 0
    assert plan.deepspeed.bytes is None and "LoRA" in plan.deepspeed.note
    # DDP: frozen base in policy.dtype (bf16), fp32 adapters with fp32 gradients, DDP buckets and AdamW moments
    ddp = by_name(plan_memory(paper_config(*lora), zero=0, gpus=8, gpu_memory_gib=80))
    assert ddp["weights"] == 2 * PSI_7B + 4 * adapters
    assert ddp["gradients"] == 8 * adapters
    assert ddp["optimizer"] == 8 * adapters
    assert ddp["reference"] == 0


def test_reference_and_vllm_switches():
    none = by_name(plan_memory(paper_config("grpo.beta=0"), zero=2, gpus=8))
    assert none["reference"] == 0
    server = by_name(plan_memory(paper_config("engine.vllm.mode=server"), zero=2, gpus=8))
    assert server["vLLM"] == 0
    asleep = plan_memory(paper_config("engine.vllm.enable_sleep_mode=true"), zero=2, gpus=8)
    vllm = next(c for c in asleep.components if c.name == "vLLM")
    assert vllm.phases == ("rollout",)  # asleep during the update: the backward no longer holds it
    assert asleep.fits and asleep.peak_phase == "rollout"


def test_verdict_flips_with_gpu_memory_and_micro_batch():
    zero3 = plan_memory(paper_config(), zero=3, gpus=8, gpu_memory_gib=80)
    assert zero3.fits
    assert not plan_memory(paper_config(), zero=3, gpus=8, gpu_memory_gib=40).fits
    assert not plan_memory(paper_config("train.micro_batch_tokens=131072"), zero=3, gpus=8, gpu_memory_gib=80).fits
    assert "DOES NOT FIT" in plan_memory(paper_config(), zero=3, gpus=8, gpu_memory_gib=40).verdict()


def test_activations_with_and_without_checkpointing():
    plan = plan_memory(paper_config(), zero=2, gpus=8)
    on, off = plan.activations, plan.activations_other
    assert on.checkpointing and not off.checkpointing
    # without checkpointing every layer keeps its 225,392 B/token: 28 x 32,768 x 225,392 (+ head input, chunk)
    # the chunk: 2,491,416,576 of logits + 4,359,979,008 of fp32 head copy and gradient (see the test above)
    assert off.total == 28 * 32768 * 225_392 + 939_524_096 + 6_851_395_584
    assert off.total > 10 * on.total


# ---------------------------------------------------------------------------------------- inputs and DeepSpeed


def test_accelerate_configs_give_stage_and_gpus():
    zero2 = read_accelerate_config(REPO / "launch/accelerate/zero2.yaml")
    zero3 = read_accelerate_config(REPO / "launch/accelerate/zero3.yaml")
    ddp = read_accelerate_config(REPO / "launch/accelerate/ddp.yaml")
    assert (zero2.zero_stage, zero2.gpus, zero2.mixed_precision) == (2, 8, "bf16")
    assert (zero3.zero_stage, zero3.gpus) == (3, 16)
    assert (ddp.zero_stage, ddp.gpus) == (0, 8)
    plan = plan_memory(paper_config(), accelerate=zero3)  # --gpus and --zero default to the file's
    assert (plan.parallelism.zero_stage, plan.parallelism.gpus) == (3, 16)
    assert plan_memory(paper_config(), accelerate=zero3, zero=2, gpus=4).parallelism.gpus == 4


def test_offload_moves_states_off_the_gpu(tmp_path):
    zero3 = (REPO / "launch/accelerate/zero3.yaml").read_text()
    offload = zero3.replace("offload_optimizer_device: none", "offload_optimizer_device: cpu")
    offload = offload.replace("offload_param_device: none", "offload_param_device: cpu")
    (tmp_path / "offload.yaml").write_text(offload)
    plan = plan_memory(paper_config(), accelerate=read_accelerate_config(tmp_path / "offload.yaml"), gpus=8)
    got = by_name(plan)
    assert got["weights"] == 0 and got["optimizer"] == 0 and got["gradients"] == 0
    assert "fp32 gradient at step" not in got
    # DeepSpeed's ZeRO-3 estimate with optimizer and parameters on the CPU: the gathered largest layer only, 4L
    assert deepspeed_formula(plan.params, plan.parallelism)[0] == 4 * EMBED_7B


def test_local_config_json_is_read(tmp_path):
    raw = {"model_type": "qwen3", "vocab_size": 151936, "hidden_size": 2560, "intermediate_size": 9728,
           "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
           "tie_word_embeddings": True, "attention_bias": False, "architectures": ["Qwen3ForCausalLM"]}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(raw))
    dims = resolve_model_dims(PolicyConfig(model=str(tmp_path)))
    assert dims.source.endswith("config.json")
    assert count_parameters(dims).total == 4_022_468_096


def test_deepspeed_estimator_when_installed_and_when_not(monkeypatch):
    plan = plan_memory(paper_config(), zero=2, gpus=8)
    if plan_module.deepspeed_available():
        # deepspeed's estimate_zero2_model_states_mem_needs(Ψ, 8, 1, cpu_offload=False) = 2Ψ + int(18Ψ/8)
        assert plan.deepspeed.bytes == 2 * PSI_7B + int(18 * PSI_7B / 8)
        assert plan.deepspeed.note == "agrees with ours"
        zero3 = plan_memory(paper_config(), zero=3, gpus=8)
        assert zero3.deepspeed.bytes == 4 * EMBED_7B + int(18 * PSI_7B / 8)
        assert "bf16 gradient partition" in zero3.deepspeed.note
    monkeypatch.setattr(plan_module, "deepspeed_available", lambda: False)
    absent = plan_memory(paper_config(), zero=2, gpus=8)
    assert absent.deepspeed.bytes is None and "not installed" in absent.deepspeed.note
    assert absent.deepspeed.formula.startswith("2Ψ + 18Ψ/N")
    assert by_name(absent) == by_name(plan)  # our figures never depend on DeepSpeed


def test_bad_input_names_the_fix(tmp_path):
    with pytest.raises(PlanError, match=r"no config.json.*policy.model to a local directory"):
        resolve_model_dims(PolicyConfig(model="acme/unknown-13b"))
    with pytest.raises(PlanError, match=r"--gpus 0: .*N >= 1"):
        plan_memory(paper_config(), gpus=0)
    with pytest.raises(PlanError, match=r"ZeRO stage 1 is not planned; use --zero 0"):
        plan_memory(paper_config(), zero=1)
    with pytest.raises(PlanError, match=r"directory without config\.json"):
        resolve_model_dims(PolicyConfig(model=str(tmp_path)))
    with pytest.raises(PlanError, match="launch/accelerate"):
        read_accelerate_config(tmp_path / "missing.yaml")
    with pytest.raises(PlanError, match="mixture-of-experts"):
        dims_from_config({"num_experts": 8, "hidden_size": 8}, "moe", "test")
    qwen = resolve_model_dims(PolicyConfig(model=QWEN25_7B))
    with pytest.raises(PlanError, match="target_modules"):
        count_parameters(qwen, LoRAConfig(enabled=True, target_modules=["x"]))


# ---------------------------------------------------------------------------------------------------------- CLI


@pytest.mark.parametrize("config", ["configs/hotpotqa_qwen2.5_7b.yaml", "configs/hotpotqa_qwen3_4b.yaml"])
@pytest.mark.parametrize("verb", [["plan"], ["train", "--dry-run"]])
def test_cli_prints_the_table_and_writes_json_for_the_paper_configs(config, verb, tmp_path, capsys):
    out = tmp_path / "plan.json"
    args = [*verb, "--config", str(REPO / config), "--accelerate-config", str(REPO / "launch/accelerate/zero2.yaml")]
    code = main([*args, "--json", str(out)])
    printed = capsys.readouterr().out
    data = json.loads(out.read_text())
    assert code == (0 if data["fits"] else 1)
    for row in ("weights", "gradients", "optimizer", "reference", "vLLM", "activations", "total: backward"):
        assert row in printed
    assert ("FITS" if data["fits"] else "DOES NOT FIT") in printed
    assert data["parallelism"]["zero_stage"] == 2 and data["parallelism"]["gpus"] == 8
    assert {c["name"] for c in data["components"]} >= {"weights", "optimizer", "reference", "vLLM", "activations"}
    assert data["peak_gib"] == pytest.approx(max(data["phases_gib"].values()))


def test_cli_flags_override_and_errors(tmp_path, capsys):
    config = str(REPO / "configs/hotpotqa_qwen2.5_7b.yaml")
    assert main(["plan", "--config", config, "--zero", "3", "--gpus", "8", "--gpu-memory-gb", "80"]) == 0
    assert "DeepSpeed ZeRO-3" in capsys.readouterr().out
    assert main(["plan", "--config", config, "--zero", "3", "--gpu-memory-gb", "32"]) == 1
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        main(["plan", "--config", config, "--gpus", "0"])
    assert info.value.code == 2 and "--gpus 0" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["plan", "policy.model=acme/unknown-13b"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "config.json" in err and "policy.model" in err
    with pytest.raises(SystemExit) as info:
        main(["train", "--gpus", "8"])  # a plan flag without --dry-run would be silently ignored by training
    assert info.value.code == 2 and "--dry-run" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("overrides", "element_bytes"),
    [
        # full fine-tune, plain accelerate: the engine shares the fp32 master weights and generates outside autocast
        (["train.mixed_precision=bf16", "policy.dtype=bfloat16", "lora.enabled=false"], 4),
        # LoRA: the engine generates through the frozen bf16 base
        (["train.mixed_precision=bf16", "policy.dtype=bfloat16", "lora.enabled=true"], 2),
    ],
)
def test_transformers_engine_kv_bytes_are_those_the_engine_holds(overrides, element_bytes):
    """The plan's KV bytes per token equal what the transformers engine's prefix cache really holds for the module
    a training run hands it (before the fix the plan counted policy.dtype, half the fp32 KV of a full fine-tune)."""
    from agemem.core.chat import render_chat
    from agemem.rollouts.engines.base import SamplingParams
    from agemem.rollouts.engines.transformers_engine import TransformersEngine
    from agemem.rollouts.policy import load_policy
    from agemem.train.policy import add_lora, plan_precision

    config = load_config(AgeMemConfig, REPO / "configs" / "tiny_cpu.yaml", [*overrides, "engine.batch_size=1"])
    plan = plan_memory(config, gpus=1, zero=0)
    planned_per_token = by_name(plan)["prefix KV cache"] / config.engine.prefix_cache_tokens
    precision = plan_precision(config.policy.dtype, "bf16", lora=config.lora.enabled, deepspeed=False)
    lm, tokenizer = load_policy(PolicyConfig(**{**vars(config.policy), "dtype": precision.load_dtype, "device": "cpu"}))
    if config.lora.enabled:
        lm = add_lora(lm, config.lora)
    engine = TransformersEngine(lm, tokenizer)
    prompt = tokenizer(render_chat(tokenizer, [{"role": "user", "content": "Where is Paris?"}]))["input_ids"]
    engine.generate([prompt], SamplingParams(max_tokens=4, seed=0))
    entry = next(iter(engine.prefix_cache._entries.values()))
    held = sum(t.numel() * t.element_size() for t in (*entry.keys_LHTD, *entry.values_LHTD)) / len(entry.tokens)
    assert entry.keys_LHTD[0].element_size() == element_bytes
    assert planned_per_token == held  # tiny model: 2 layers x 2 (K, V) x 32 kv width x bytes
