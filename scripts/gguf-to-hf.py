#!/usr/bin/env python3
"""Converts the Gemma 3 270M GGUF to a Hugging Face directory that vLLM's CPU build loads.

usage: gguf-to-hf.py MODEL.gguf OUT_DIR   (run with the vLLM venv's python, offline)

vLLM 0.32 has no CPU path for GGUF weights, so the test server serves a converted copy:
- transformers keeps GGUF weights packed unless asked to dequantize, and refuses to save a
  model that still has its quantizer, so both are cleared;
- the GGUF-derived tokenizer adds no <bos>, which Gemma needs (raw completions are noise
  without it): the post-processor is set to prepend it;
- generation stops on <end_of_turn> (106) as well as <eos> (1).
"""
import json
import os
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig


def main() -> None:
    gguf, out = sys.argv[1], sys.argv[2]
    folder, name = os.path.dirname(gguf), os.path.basename(gguf)
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(
        folder,
        gguf_file=name,
        dtype=torch.bfloat16,
        quantization_config=GgufConfig(gguf_file=name, dequantize=True),
    )
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.config.architectures = ["Gemma3ForCausalLM"]
    model.save_pretrained(out)
    tok.save_pretrained(out)

    path = os.path.join(out, "tokenizer.json")
    with open(path, encoding="utf-8") as f:
        spec = json.load(f)
    bos = {"SpecialToken": {"id": "<bos>", "type_id": 0}}
    spec["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [bos, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [
            bos,
            {"Sequence": {"id": "A", "type_id": 0}},
            {"SpecialToken": {"id": "<bos>", "type_id": 1}},
            {"Sequence": {"id": "B", "type_id": 1}},
        ],
        "special_tokens": {"<bos>": {"id": "<bos>", "ids": [2], "tokens": ["<bos>"]}},
    }
    with open(path, "w", encoding="utf-8") as f:
        json.dump(spec, f, ensure_ascii=False)

    path = os.path.join(out, "generation_config.json")
    with open(path, encoding="utf-8") as f:
        gen = json.load(f)
    gen["eos_token_id"] = [1, 106]
    with open(path, "w", encoding="utf-8") as f:
        json.dump(gen, f, indent=2)


if __name__ == "__main__":
    main()
