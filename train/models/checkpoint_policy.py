"""A transformers checkpoint folder (a train/stages/grpo.py output, the converted SmolLM2 folder) as an episode's agent.

Each turn's prompt starts with the last one's tokens (the system prompt with the whole catalog, then the
conversation so far), and the next task of the same domain starts with the same system prompt. The policy keeps
the attention cache of what it read and wrote last, cut back to the longest prefix the new prompt shares with it,
so a turn reads only its new tokens: on a 2-core CPU a ~4,500-token catalog prompt costs 3-4 s to read again
each turn (bench/eval_prefix_cache.py measures it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def shared_prefix(a: list[int], b: list[int]) -> int:
    """How many leading tokens two sequences share."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


@dataclass
class CheckpointPolicy:
    """Greedy generation with the folder's chat template; counts the tokens it reads and writes. ``bf16``: under CPU
    bf16 autocast (the profile's ``model.mixed_precision``), as the model was trained and sampled. ``reuse_prefix``:
    keep the attention cache between turns (greedy output is the same, only the reading is saved)."""

    model: Any
    tokenizer: Any
    max_new_tokens: int = 256
    bf16: bool = False
    reuse_prefix: bool = True
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reused_tokens: int = 0  # prompt tokens served from the kept cache instead of being read again
    _cached_ids: list[int] = field(default_factory=list, repr=False)
    _cache: Any = field(default=None, repr=False)

    @classmethod
    def load(cls, folder: str, max_new_tokens: int = 256, bf16: bool = False,
             reuse_prefix: bool = True) -> CheckpointPolicy:
        from transformers import AutoModelForCausalLM

        from train.models.checkpoints import evaluation_problems
        from train.models.model import load_tokenizer

        if problems := evaluation_problems(folder):
            raise ValueError(f"cannot load {folder}: incomplete checkpoint ({'; '.join(problems)})")
        tokenizer = load_tokenizer(folder)
        model = AutoModelForCausalLM.from_pretrained(folder)
        model.eval()
        return cls(model, tokenizer, max_new_tokens, bf16=bf16, reuse_prefix=reuse_prefix)

    def _kept_cache(self, prompt: list[int]) -> Any:
        """The kept cache cut back to what ``prompt`` shares with it (at least the prompt's last token is left to
        read, as generation needs a token to start from), or a fresh cache."""
        from transformers import DynamicCache

        keep = min(shared_prefix(self._cached_ids, prompt), len(prompt) - 1)
        if self._cache is None or keep <= 0:
            return DynamicCache()
        surplus = self._cache.get_seq_length() - keep
        if surplus > 0:
            self._cache.crop(-surplus)  # drops that many tokens from the end (a positive length is deprecated)
        self.reused_tokens += keep
        return self._cache

    def act(self, messages: list[dict[str, str]]) -> str:
        import torch

        ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt")
        if hasattr(ids, "keys"):  # some tokenizers return a BatchEncoding
            ids = ids["input_ids"]
        from train.models.model import cpu_autocast

        prompt = ids[0].tolist()
        extra: dict[str, Any] = {}
        if self.reuse_prefix:
            extra = {"past_key_values": self._kept_cache(prompt), "use_cache": True}
            self._cache, self._cached_ids = None, []  # a failed generation leaves no half-filled cache behind
        with torch.no_grad(), cpu_autocast(self.bf16):
            out = self.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=self.max_new_tokens,
                                      do_sample=False, eos_token_id=self.tokenizer.eos_token_id,
                                      pad_token_id=self.tokenizer.pad_token_id, **extra)
        if self.reuse_prefix:
            cache = extra["past_key_values"]
            self._cache, self._cached_ids = cache, out[0, : cache.get_seq_length()].tolist()
        new = out[0, ids.shape[1]:].tolist()
        self.prompt_tokens += int(ids.shape[1])
        self.completion_tokens += len(new)
        return self.tokenizer.decode(new, skip_special_tokens=True)
