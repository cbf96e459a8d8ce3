"""The torch-free GGUF tokenizer equals transformers' own GGUF tokenizer on the embedded model."""

import os

from activemem_jax.models.gguf_tokenizer import gguf_tokenizer
from activemem_jax.models.embedded import embedded_gguf_path

TEXTS = ("Hello, world!", "The code for Kaloren is purple.", "  spaces\tand\nnewlines  ", "naïve café — 東京 🙂",
         "<|im_start|>user\nhi<|im_end|>")


def test_matches_transformers_gguf_tokenizer():
    from transformers import AutoTokenizer

    path = embedded_gguf_path()
    ours = gguf_tokenizer(path)
    ref = AutoTokenizer.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path))
    for text in TEXTS:
        ids = ref(text, add_special_tokens=False)["input_ids"]
        assert ours(text, add_special_tokens=False)["input_ids"] == ids, text
        assert ours.decode(ids) == ref.decode(ids)
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+2?"}]
    assert (ours.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
            == ref.apply_chat_template(chat, add_generation_prompt=True, tokenize=False))
    assert ours.eos_token_id == ref.eos_token_id and len(ours) == len(ref)
