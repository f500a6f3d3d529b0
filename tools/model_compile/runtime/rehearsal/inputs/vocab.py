"""The rehearsal's word-level vocabulary: one fixed layout shared by the plan (token ids written into the tiny
model's config) and the child (the tokenizer saved beside the tiny checkpoint).

Pure Python: the static plan imports it without torch. A synthetic sample is a sequence of words `w0 w1 ...`;
each word is one token, and each special token one token, so a sample's token count is known before the
recipe's tokenizer sees it.
"""

from __future__ import annotations

VOCAB_SIZE = 512
SPECIAL = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<|vision_pad|>",
    "<tool_call>",
    "</tool_call>",
    "<think>",
    "</think>",
    "[UNK]",
)
ROLE_WORDS = ("system", "user", "assistant", "tool")
FIRST_WORD = len(SPECIAL) + len(ROLE_WORDS)
WORDS = VOCAB_SIZE - FIRST_WORD  # w0 .. w{WORDS-1}


def token_id(token: str) -> int:
    """The id of a special token or role word."""
    if token in SPECIAL:
        return SPECIAL.index(token)
    return len(SPECIAL) + ROLE_WORDS.index(token)


def vocabulary() -> dict[str, int]:
    """Token -> id, VOCAB_SIZE entries."""
    vocab = {t: i for i, t in enumerate(SPECIAL)}
    for word in ROLE_WORDS:
        vocab[word] = len(vocab)
    for i in range(WORDS):
        vocab[f"w{i}"] = len(vocab)
    return vocab


# Token ids a Qwen-style config names (top level of a VLM config, the text config of a causal LM).
CONFIG_TOKENS = {
    "eos_token_id": "<|endoftext|>",
    "pad_token_id": "<|endoftext|>",
    "bos_token_id": "<|endoftext|>",
    "image_token_id": "<|image_pad|>",
    "image_token_index": "<|image_pad|>",
    "video_token_id": "<|video_pad|>",
    "video_token_index": "<|video_pad|>",
    "vision_start_token_id": "<|vision_start|>",
    "vision_end_token_id": "<|vision_end|>",
    "vision_token_id": "<|vision_pad|>",
}

# A chat template in the Qwen form: the recipe's chat schema renders a source prefix and a target with it.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' or 'image' in part %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif part['type'] == 'video' or 'video' in part %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in part %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}"
    "<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
