"""A GGUF file's tokenizer without torch.

transformers 5.24 builds a GGUF tokenizer (`AutoTokenizer.from_pretrained(dir,
gguf_file=...)`) through a metadata reader that imports torch, so a torch-free install
cannot tokenize the embedded model. This does the same with the `gguf` package's reader
and transformers' own (torch-free) field mapping and converter.

    tok = gguf_tokenizer("/path/to/model.gguf")   # a transformers TokenizersBackend
"""

from __future__ import annotations


def gguf_metadata(path: str) -> dict:
    """GGUF key -> value (strings decoded; arrays as lists) for the general and
    tokenizer fields."""
    from gguf.constants import GGUFValueType

    from activemem_jax.models.checkpoint_files import parsed_gguf

    reader = parsed_gguf(path)
    out = {}
    for key, field in reader.fields.items():
        if not (key.startswith("tokenizer.") or key.startswith("general.")):
            continue
        types = list(field.types)
        if not types:
            continue
        if types[0] == GGUFValueType.ARRAY:
            items = [field.parts[i] for i in field.data]
            if types[-1] == GGUFValueType.STRING:
                out[key] = [bytes(x).decode("utf-8") for x in items]
            else:
                out[key] = [x.tolist()[0] for x in items]
        elif types[0] == GGUFValueType.STRING:
            out[key] = bytes(field.parts[field.data[0]]).decode("utf-8")
        else:
            out[key] = field.parts[field.data[0]].tolist()[0]
    return out


def gguf_tokenizer(path: str):
    """The tokenizer `AutoTokenizer.from_pretrained(dirname, gguf_file=basename)` builds."""
    from transformers import PreTrainedTokenizerFast
    from transformers.integrations.gguf.gguf_tokenizer_mapping import (GGUF_TOKENIZER_MAPPING, _SPECIAL_TOKENS,
                                                                       convert_gguf_tokenizer)

    metadata = gguf_metadata(path)
    grouped = {group: {name: metadata[f"tokenizer.{key}"] for key, name in renames.items()
                       if f"tokenizer.{key}" in metadata}
               for group, renames in GGUF_TOKENIZER_MAPPING.items()}
    tokenizer, config = grouped["tokenizer"], grouped["tokenizer_config"]
    if tokenizer.get("tokenizer_type") == "llama":
        config.setdefault("add_bos_token", True)
    for name, key in _SPECIAL_TOKENS.items():
        token_id = metadata.get(f"tokenizer.ggml.{key}")
        config[name] = tokenizer["tokens"][token_id] if token_id is not None else None
    backend, extra = convert_gguf_tokenizer(metadata["general.architecture"], tokenizer)
    return PreTrainedTokenizerFast(tokenizer_object=backend, **config, **extra)


__all__ = ["gguf_metadata", "gguf_tokenizer"]
