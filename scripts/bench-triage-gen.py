#!/usr/bin/env python3
"""Generates the production-like triage benchmark inputs from the real logs in ../shared.

Usage: bench-triage-gen.py SHARED_DIR OUT_DIR MIB

Writes (only when missing or smaller than MIB):
  healthy.log    the healthy logs of shared/long (INDEX.tsv outcome ok) repeated, then a real
                 NCCL failure fragment (corpus 010) at the end;
  crashloop.log  one real startup failure log (long/009: banner, load, traceback, exit)
                 repeated: the same failure thousands of times;
  multirank.log  the healthy logs' lines spread over four ranks (docker ISO timestamps and
                 torchrun `[rankN]:` prefixes, interleaved), then a real rank-1 NCCL failure
                 (corpus 028) with the same prefixes at the end.
Nothing from shared is copied into the repository; the files go to OUT_DIR.
"""
import os
import sys

shared, out, mib = sys.argv[1], sys.argv[2], int(sys.argv[3])
target = mib << 20
os.makedirs(out, exist_ok=True)


def read(p):
    with open(os.path.join(shared, p), "rb") as f:
        return f.read()


def healthy_ids():
    ids = []
    for row in read("long/INDEX.tsv").decode().splitlines()[1:]:
        cols = row.split("\t")
        if len(cols) > 2 and cols[2] == "ok":
            ids.append(cols[0])
    return ids


def need(name):
    p = os.path.join(out, name)
    return not os.path.exists(p) or os.path.getsize(p) < target


def write_repeated(name, block, tail):
    if not block.endswith(b"\n"):
        block += b"\n"
    # Repeat in large writes.
    reps = max(1, (4 << 20) // len(block))
    big = block * reps
    with open(os.path.join(out, name), "wb") as f:
        n = 0
        while n < target:
            f.write(big)
            n += len(big)
        f.write(tail)


healthy = b"".join(read(f"long/{i}.log").rstrip(b"\n") + b"\n" for i in healthy_ids())

if need("healthy.log"):
    write_repeated("healthy.log", healthy, read("corpus/010.log"))

if need("crashloop.log"):
    write_repeated("crashloop.log", read("long/009.log"), b"")

if need("multirank.log"):
    lines = healthy.splitlines()
    ranks = 4
    blk = []
    # Timestamps advance 1 ms per line, four ranks interleaved line by line.
    for i, l in enumerate(lines * ranks):
        r = i % ranks
        ms = i
        ts = "2025-09-09T07:%02d:%02d.%03d000Z" % ((ms // 60000) % 60, (ms // 1000) % 60, ms % 1000)
        blk.append(b"%s [rank%d]: %s" % (ts.encode(), r, l))
    block = b"\n".join(blk) + b"\n"
    tail = b"".join(
        b"2025-09-09T08:00:00.%03d000Z %s\n" % (i % 1000, l)
        for i, l in enumerate(read("corpus/028.log").splitlines())
    )
    write_repeated("multirank.log", block, tail)
