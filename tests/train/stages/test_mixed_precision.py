"""CPU mixed precision (``model.mixed_precision: bf16``): fp32 weights, bf16 matrix products in training and sampling.

On a CPU with AMX (the project's machines until 7 December 2026; an AVX2 EPYC since, where a bf16 profile runs fp32)
an SFT step of SmolLM2 on 2k tokens takes about half the fp32 time and a
prefill about a third (measured in docs/training.md); these tests check what a user relies on: the profile field is
validated, the trainer runs under autocast and still saves fp32 weights, and sampling runs its products in bf16."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from train.models.checkpoint_policy import CheckpointPolicy
from train.models.model import HFGenerator
from train.stages import profiles
from train.stages.profiles import PROFILES_DIR, ProfileError, load_profile
from train.stages.sft import Demonstration, fine_tune


def _bf16_products(model: Any) -> list[torch.dtype]:
    """The output dtypes of the model's linear layers, recorded by forward hooks while the caller runs it."""
    seen: list[torch.dtype] = []
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            module.register_forward_hook(lambda m, i, out: seen.append(out.dtype))
    return seen


def test_the_cpu_learn_profile_trains_in_bf16_and_the_field_is_checked(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(profiles, "cpu_computes_bf16", lambda: True)
    profile = load_profile("cpu-learn")
    assert profile.model.mixed_precision == "bf16" and profile.model.bf16 and profile.model.sample_bf16
    smoke = load_profile("cpu-smoke")
    assert not smoke.model.bf16 and not smoke.model.sample_bf16
    data = yaml.safe_load((PROFILES_DIR / "cpu-learn.yaml").read_text())
    for change, words in [({"mixed_precision": "fp8"}, "model.mixed_precision must be no or bf16"),
                          ({"dtype": "bfloat16"}, "it needs model.dtype float32")]:
        path = tmp_path / "p.yaml"
        path.write_text(yaml.safe_dump({**data, "model": {**data["model"], **change}}))
        with pytest.raises(ProfileError, match=words):
            load_profile(str(path))


def test_a_cpu_without_bf16_arithmetic_runs_a_bf16_profile_in_fp32(monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """On an AVX2-only CPU bf16 autocast is emulated: a matrix product took 37x the fp32 time, so an SFT step of
    cpu-learn went from seconds to minutes. There the profile runs fp32; a GPU profile is not affected."""
    monkeypatch.setattr(profiles, "cpu_computes_bf16", lambda: False)
    model = load_profile("cpu-learn").model
    assert model.mixed_precision == "bf16" and not model.bf16 and not model.sample_bf16
    assert load_profile("h100").model.bf16
    native = torch.cpu._is_amx_tile_supported() or torch.cpu._is_avx512_bf16_supported()
    monkeypatch.undo()
    profiles.cpu_computes_bf16.cache_clear()
    assert profiles.cpu_computes_bf16() == native
    assert ("neither AMX nor AVX512-BF16" in capsys.readouterr().err) == (not native)


def test_sft_under_bf16_autocast_keeps_fp32_weights(tiny_model_path: str, tokenizer: Any, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(profiles, "cpu_computes_bf16", lambda: True)  # the autocast path, whatever this CPU does
    profile = load_profile("cpu-learn")
    profile = replace(profile, sft=replace(profile.sft, max_steps=1, save_steps=1))
    ids = tokenizer.encode("<|im_start|>assistant\nthe weather is fine<|im_end|>")
    demo = Demonstration("t1", ids, [-100] + ids[1:])
    result = fine_tune(profile, tiny_model_path, tokenizer, [demo], str(tmp_path / "sft"))
    assert result.global_step == 1
    args = torch.load(Path(result.checkpoints[-1]) / "training_args.bin", weights_only=False)
    assert args.bf16 and args.use_cpu
    from safetensors import safe_open

    with safe_open(str(Path(result.final_checkpoint) / "model.safetensors"), "pt") as f:
        assert {f.get_slice(k).get_dtype() for k in f.keys()} == {"F32"}


def test_sampling_runs_its_products_in_bf16_only_when_asked(tiny_model_path: str, tokenizer: Any) -> None:
    policy = CheckpointPolicy.load(tiny_model_path, max_new_tokens=3, bf16=True)
    seen = _bf16_products(policy.model)
    policy.act([{"role": "user", "content": "hello"}])
    assert seen and set(seen) == {torch.bfloat16}
    assert next(policy.model.parameters()).dtype == torch.float32
    seen.clear()
    HFGenerator(policy.model, tokenizer, bf16=False).generate([tokenizer.encode("hi")], 2)
    assert seen and set(seen) == {torch.float32}
    seen.clear()
    HFGenerator(policy.model, tokenizer, bf16=True).generate([tokenizer.encode("hi")], 2)
    assert seen and set(seen) == {torch.bfloat16}


def test_cpu_generation_runs_in_small_batches_shortest_first_and_keeps_the_order(tiny_model_path: str,
                                                                                 tokenizer: Any) -> None:
    """On CPU a batch saves nothing and its padding costs (train/models/model.py): contexts go in batches of at most
    ``max_batch``, shortest first, and each result comes back in its context's place."""
    policy = CheckpointPolicy.load(tiny_model_path, max_new_tokens=3)
    widths: list[tuple[int, int]] = []
    policy.model.register_forward_pre_hook(lambda m, args, kwargs: widths.append(tuple(kwargs["input_ids"].shape)),
                                           with_kwargs=True)
    contexts = [tokenizer.encode(t) for t in ("one two three four five six seven", "a b c", "x y z",
                                              "seven words here and there and more", "five words are right here")]
    lengths = [len(c) for c in contexts]
    generator = HFGenerator(policy.model, tokenizer, temperature=1e-5, max_batch=2)
    torch.manual_seed(0)
    together = generator.generate(contexts, 3)
    prefills = [w for w in widths if w[1] > 1]
    assert [w[0] for w in prefills] == [2, 2, 1]  # three batches of at most two
    assert prefills[0][1] == min(lengths)  # the shortest went first
    alone = []
    for c in contexts:
        torch.manual_seed(0)
        alone.append(HFGenerator(policy.model, tokenizer, temperature=1e-5).generate([c], 3)[0])
    same_length = [i for i, n in enumerate(lengths) if lengths.count(n) == 2]  # batched without padding
    assert same_length and all(together[i] == alone[i] for i in same_length)
