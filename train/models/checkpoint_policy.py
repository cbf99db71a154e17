"""A transformers checkpoint folder (a train/stages/grpo.py output, the converted SmolLM2 folder) as an episode's agent."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class CheckpointPolicy:
    """Greedy generation with the folder's chat template; counts the tokens it reads and writes. ``bf16``: under CPU
    bf16 autocast (the profile's ``model.mixed_precision``), as the model was trained and sampled."""

    model: Any
    tokenizer: Any
    max_new_tokens: int = 256
    bf16: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @classmethod
    def load(cls, folder: str, max_new_tokens: int = 256, bf16: bool = False) -> CheckpointPolicy:
        from transformers import AutoModelForCausalLM

        from train.models.checkpoints import evaluation_problems
        from train.models.model import load_tokenizer

        if problems := evaluation_problems(folder):
            raise ValueError(f"cannot load {folder}: incomplete checkpoint ({'; '.join(problems)})")
        tokenizer = load_tokenizer(folder)
        model = AutoModelForCausalLM.from_pretrained(folder)
        model.eval()
        return cls(model, tokenizer, max_new_tokens, bf16=bf16)

    def act(self, messages: list[dict[str, str]]) -> str:
        import torch

        ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt")
        if hasattr(ids, "keys"):  # some tokenizers return a BatchEncoding
            ids = ids["input_ids"]
        from train.models.model import cpu_autocast

        with torch.no_grad(), cpu_autocast(self.bf16):
            out = self.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=self.max_new_tokens,
                                      do_sample=False, eos_token_id=self.tokenizer.eos_token_id,
                                      pad_token_id=self.tokenizer.pad_token_id)
        new = out[0, ids.shape[1]:].tolist()
        self.prompt_tokens += int(ids.shape[1])
        self.completion_tokens += len(new)
        return self.tokenizer.decode(new, skip_special_tokens=True)
