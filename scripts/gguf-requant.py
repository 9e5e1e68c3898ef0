#!/usr/bin/env python3
"""Rewrites a GGUF with every quantized tensor converted to F16, BF16, F32 or Q8_0.

Why: the prebuilt llama-server's CPU backend uses AVX-VNNI (VEX vpdpbusd) in its
k-quant dot products and dies with SIGILL on CPUs that only have AVX512-VNNI. The
float kernels (F16/BF16/F32) do not use those instructions, so converting the weights
at install time gives a model the same binary can run. All KV metadata (tokenizer
arrays included) is copied unchanged except general.file_type, which is set to match.

Needs the PyPI packages gguf and numpy on sys.path (the caller sets PYTHONPATH).

    gguf-requant.py IN.gguf OUT.gguf [--type f16|bf16|f32|q8_0] [--keep NAME_REGEX]
"""
import argparse
import os
import re
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT

# general.file_type values (llama.cpp's LLAMA_FTYPE_*).
FILE_TYPES = {"f32": 0, "f16": 1, "q8_0": 7, "bf16": 32}
TARGETS = {"f32": QT.F32, "f16": QT.F16, "bf16": QT.BF16, "q8_0": QT.Q8_0}
FLOAT_TYPES = (QT.F32, QT.F16, QT.BF16)
ROWS_PER_CHUNK = 8192  # bounds peak memory while converting the 262144-row embedding


def to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns (uint16), round to nearest even like ggml."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = (u + (0x7FFF + ((u >> 16) & 1))) >> 16
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    rounded = np.where(nan, (u >> 16) | 0x40, rounded)
    return rounded.astype(np.uint16)


def convert_rows(raw: np.ndarray, src: QT, dst: QT) -> np.ndarray:
    values = gguf.quants.dequantize(raw, src)
    if dst == QT.F32:
        return values.astype(np.float32, copy=False)
    if dst == QT.F16:
        return values.astype(np.float16)
    if dst == QT.BF16:
        return to_bf16_bits(values)
    return gguf.quants.quantize(values, dst)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--type", choices=sorted(TARGETS), default="f16")
    ap.add_argument("--keep", default="", help="regex of tensor names to copy unchanged")
    args = ap.parse_args()
    dst_type = TARGETS[args.type]
    keep = re.compile(args.keep) if args.keep else None

    reader = gguf.GGUFReader(args.src)
    arch_field = reader.fields[gguf.Keys.General.ARCHITECTURE]
    arch = arch_field.contents()
    tmp = args.dst + ".tmp"
    writer = gguf.GGUFWriter(tmp, arch, endianess=reader.endianess)

    for field in reader.fields.values():
        # GGUF.* are virtual; the writer emits general.architecture itself.
        if field.name.startswith("GGUF.") or field.name == gguf.Keys.General.ARCHITECTURE:
            continue
        if field.name == gguf.Keys.General.FILE_TYPE and not keep:
            writer.add_key_value(field.name, FILE_TYPES[args.type], gguf.GGUFValueType.UINT32)
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), vtype, sub_type=sub)

    plan = []
    for t in reader.tensors:
        np_shape = tuple(int(d) for d in reversed(t.shape.tolist()))
        convert = t.tensor_type not in FLOAT_TYPES and not (keep and keep.search(t.name))
        if not convert:
            writer.add_tensor_info(t.name, t.data.shape, t.data.dtype, t.data.nbytes, t.tensor_type)
        elif dst_type == QT.Q8_0:
            block, size = gguf.GGML_QUANT_SIZES[QT.Q8_0]
            byte_shape = (*np_shape[:-1], np_shape[-1] // block * size)
            writer.add_tensor_info(t.name, byte_shape, np.uint8, int(np.prod(byte_shape)), QT.Q8_0)
        else:
            itemsize = 4 if dst_type == QT.F32 else 2
            dtype = {QT.F32: np.float32, QT.F16: np.float16, QT.BF16: np.uint16}[dst_type]
            writer.add_tensor_info(t.name, np_shape, dtype, int(t.n_elements) * itemsize,
                                   None if dst_type != QT.BF16 else QT.BF16)
        plan.append((t, convert))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for t, convert in plan:
        if not convert:
            writer.write_tensor_data(t.data, tensor_endianess=reader.endianess)
            continue
        raw = t.data.reshape(-1, t.data.shape[-1])
        parts = [convert_rows(raw[i:i + ROWS_PER_CHUNK], t.tensor_type, dst_type)
                 for i in range(0, raw.shape[0], ROWS_PER_CHUNK)]
        out = np.concatenate(parts, axis=0)
        # write_tensor_data only checks byte counts; the shape was fixed by add_tensor_info.
        writer.write_tensor_data(np.ascontiguousarray(out))
    writer.close()
    os.replace(tmp, args.dst)
    return 0


if __name__ == "__main__":
    sys.exit(main())
