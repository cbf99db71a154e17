"""The checkpoint policy keeps the attention cache between turns: the same greedy replies as reading every prompt
afresh, with only the new tokens read."""

from __future__ import annotations

from train.models.checkpoint_policy import CheckpointPolicy, shared_prefix

SYSTEM = {"role": "system", "content": "You are a customer-service agent. " + "Tools: get_station, change_plan. " * 20}


def _conversation() -> list[list[dict[str, str]]]:
    """Three prompts as an episode grows (each extends the last), then a new task with the same system prompt."""
    first = [SYSTEM, {"role": "user", "content": "What is the wind at Rotterdam?"}]
    second = first + [{"role": "assistant", "content": "Let me look."}, {"role": "user", "content": "Thanks."}]
    third = second + [{"role": "assistant", "content": "It is 12 kph."}, {"role": "user", "content": "And rain?"}]
    other = [SYSTEM, {"role": "user", "content": "Move me to the pro plan."}]
    return [first, second, third, other]


def _read_widths(policy: CheckpointPolicy) -> list[int]:
    widths: list[int] = []
    policy.model.register_forward_pre_hook(lambda m, args, kwargs: widths.append(kwargs["input_ids"].shape[1]),
                                           with_kwargs=True)
    return widths


def test_replies_equal_reading_afresh_and_each_turn_reads_only_its_new_tokens(tiny_model_path: str) -> None:
    kept = CheckpointPolicy.load(tiny_model_path, max_new_tokens=4)
    fresh = CheckpointPolicy.load(tiny_model_path, max_new_tokens=4, reuse_prefix=False)
    widths = _read_widths(kept)
    prompts = _conversation()
    for messages in prompts:
        start = len(widths)
        assert kept.act(messages) == fresh.act(messages)
        first_read = widths[start]
        prompt = kept.tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt")
        prompt_len = (prompt["input_ids"] if hasattr(prompt, "keys") else prompt).shape[1]
        if messages is prompts[0]:
            assert first_read == prompt_len  # nothing kept yet: the whole prompt is read
        else:
            assert first_read < prompt_len / 2  # the shared prefix (the long system prompt) is not read again
    assert kept.reused_tokens > 0 and fresh.reused_tokens == 0
    assert kept.prompt_tokens == fresh.prompt_tokens and kept.completion_tokens == fresh.completion_tokens


def test_a_prompt_equal_to_the_kept_tokens_still_leaves_one_token_to_read(tiny_model_path: str) -> None:
    policy = CheckpointPolicy.load(tiny_model_path, max_new_tokens=3)
    widths = _read_widths(policy)
    messages = _conversation()[0]
    one = policy.act(messages)
    start = len(widths)
    assert policy.act(messages) == one  # the same prompt again: the same reply
    assert widths[start] == 1


def test_shared_prefix_counts_leading_equal_tokens() -> None:
    assert shared_prefix([1, 2, 3], [1, 2, 4, 5]) == 2
    assert shared_prefix([], [1]) == 0
    assert shared_prefix([1, 2], [1, 2]) == 2
