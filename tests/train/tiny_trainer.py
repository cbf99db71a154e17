"""A real transformers Trainer on a tiny Llama (SmolLM2's tokenizer, one 16-wide layer): real checkpoints in a second.

Used by tests/train/models/test_checkpoints.py in-process, and as a script for the kill test:

    python -m tests.train.tiny_trainer OUTPUT_DIR TOKENIZER_DIR [--kill-in checkpoint-2/optimizer.pt]

The script resumes exactly as ``train.stages.grpo.train`` does (``train.models.checkpoints.resume_point``) and prints one JSON
line. With ``--kill-in`` it SIGKILLs itself halfway through writing that file: the first half of the real bytes is
on disk, the rest never comes, which is what a kill -9 during ``torch.save`` leaves.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import signal
from pathlib import Path
from typing import Any

import torch

SEQ = 8


class TokenRows(torch.utils.data.Dataset):  # type: ignore[type-arg]
    """A few fixed token rows; the labels are the inputs (causal LM loss)."""

    def __init__(self, rows: int = 8) -> None:
        gen = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, 1000, (rows, SEQ), generator=gen)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "attention_mask": torch.ones(SEQ, dtype=torch.long), "labels": self.ids[i]}


def tiny_trainer(output_dir: str | Path, tokenizer_dir: str, max_steps: int = 2) -> Any:
    """A Trainer that saves a full checkpoint (weights, tokenizer, optimizer, scheduler, RNG, state) every step."""
    from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

    from train.models.model import load_tokenizer

    tokenizer = load_tokenizer(tokenizer_dir)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
    args = TrainingArguments(output_dir=str(output_dir), max_steps=max_steps, save_strategy="steps", save_steps=1,
                             per_device_train_batch_size=2, learning_rate=1e-3, logging_steps=1, use_cpu=True,
                             report_to="none", disable_tqdm=True, dataloader_num_workers=0, seed=0)
    return Trainer(model=LlamaForCausalLM(config), args=args, train_dataset=TokenRows(), processing_class=tokenizer)


def tiny_model(folder: str | Path, tokenizer_dir: str) -> str:
    """A one-layer, 16-wide Llama with SmolLM2's tokenizer saved as a model folder: the stages' trainers, samplers
    and evaluation run on it in seconds where SmolLM2 takes a minute a step on CPU (its output is noise)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from train.models.model import load_tokenizer

    tokenizer = load_tokenizer(tokenizer_dir)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=8192,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                         bos_token_id=tokenizer.bos_token_id)
    LlamaForCausalLM(config).save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return str(folder)


def kill_while_writing(target: str) -> None:
    """Make the real ``torch.save`` of ``target`` (``checkpoint-N/file``) write half its bytes, then SIGKILL us."""
    real_save = torch.save

    def save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> None:
        if isinstance(f, (str, os.PathLike)) and str(f).endswith(target):
            buffer = io.BytesIO()
            real_save(obj, buffer, *args, **kwargs)
            data = buffer.getvalue()
            with open(f, "wb") as out:
                out.write(data[: len(data) // 2])
            os.kill(os.getpid(), signal.SIGKILL)  # no handler, no cleanup: the rest of the save never happens
        real_save(obj, f, *args, **kwargs)

    torch.save = save


def main(argv: list[str] | None = None) -> int:
    from train.models.checkpoints import resume_point

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output_dir")
    parser.add_argument("tokenizer_dir")
    parser.add_argument("--kill-in", default=None, help="checkpoint-N/file to be killed halfway through writing")
    args = parser.parse_args(argv)
    if args.kill_in:
        kill_while_writing(args.kill_in)
    trainer = tiny_trainer(args.output_dir, args.tokenizer_dir)
    start = resume_point(args.output_dir)
    trainer.train(resume_from_checkpoint=start)
    print(json.dumps({"resumed_from": start, "global_step": trainer.state.global_step}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
