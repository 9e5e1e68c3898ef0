#!/usr/bin/env python3
"""Error messages an inference engine raises or logs at ERROR, read from its Python sources.

usage: engine_messages.py ENGINE_ROOT...   (a directory holding a `vllm/` or `sglang/` package)

Prints one JSON object per message: engine, group, file (inside the package), line, function,
kind (`raise`, `log` for ERROR/CRITICAL, or `info` / `warning` for the logger calls that must
stay quiet: the false-alarm measure), exc (the exception class for raises) and msg (the text with each
f-string field rendered as `X`). Only messages with at least 12 characters of literal text are
kept (a bare `raise ValueError(msg)` says nothing by itself). Groups: config,
engine (engine/executor/worker/scheduler), distributed, entrypoints (incl. tool and reasoning
parsers), kv_cache; files outside them are not printed.
"""
import ast
import json
import os
import re
import sys

GROUPS = {
    "vllm": [
        ("kv_cache", r"^vllm/(v1/core/(kv_cache|block_pool|single_type_kv|kv_cache_coordinator)|v1/kv_cache_interface|distributed/kv_transfer/|v1/core/sched/|core/block)"),
        ("config", r"^vllm/(config/|engine/arg_utils\.py|transformers_utils/config\.py)"),
        ("distributed", r"^vllm/distributed/"),
        ("entrypoints", r"^vllm/(entrypoints/|tool_parsers/|reasoning/)"),
        ("engine", r"^vllm/(v1/engine/|v1/executor/|v1/worker/|engine/|executor/|worker/)"),
    ],
    "sglang": [
        ("kv_cache", r"^sglang/srt/mem_cache/"),
        ("config", r"^sglang/srt/(server_args\.py|configs/)"),
        ("distributed", r"^sglang/srt/distributed/"),
        ("entrypoints", r"^sglang/srt/(entrypoints/|function_call/|parser/|reasoning_parser\.py|openai_api/)"),
        ("engine", r"^sglang/srt/(managers/|model_executor/)"),
    ],
}

LOG_LEVELS = {"error", "exception", "critical", "fatal"}
# Logger calls that do not report a failure (`logger.info`, `logger.warning_once`, ...).
QUIET_LEVELS = {"info": "info", "info_once": "info", "warning": "warning", "warning_once": "warning", "warn": "warning"}


def text_of(node):
    """Literal text of a message expression, f-string fields as X; None if not a message."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        out = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                out.append(str(v.value))
            else:
                out.append("X")
        return "".join(out)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        left = text_of(node.left)
        if isinstance(node.op, ast.Mod):
            return None if left is None else re.sub(r"%[-+ 0#]*\d*(?:\.\d+)?[sdrfgixX]", "X", left)
        right = text_of(node.right)
        if left is None and right is None:
            return None
        return (left or "X") + (right or "X")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        base = text_of(node.func.value)
        return None if base is None else re.sub(r"\{[^{}]*\}", "X", base)
    return None


def literal_len(msg):
    return len(msg.replace("X", "").strip())


def exc_name(node):
    f = node.func if isinstance(node, ast.Call) else node
    if isinstance(f, ast.Name):
        return f.id
    if isinstance(f, ast.Attribute):
        parts = []
        while isinstance(f, ast.Attribute):
            parts.append(f.attr)
            f = f.value
        if isinstance(f, ast.Name):
            parts.append(f.id)
        return ".".join(reversed(parts))
    return None


class Visitor(ast.NodeVisitor):
    def __init__(self, emit):
        self.emit = emit
        self.func = "<module>"

    def visit_FunctionDef(self, node):
        old, self.func = self.func, node.name
        self.generic_visit(node)
        self.func = old

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Raise(self, node):
        exc = node.exc
        if isinstance(exc, ast.Call) and exc.args:
            msg = text_of(exc.args[0])
            name = exc_name(exc)
            if msg is not None and name and literal_len(msg) >= 12:
                self.emit("raise", node.lineno, self.func, name, msg)
        self.generic_visit(node)

    def visit_Call(self, node):
        f = node.func
        if (
            isinstance(f, ast.Attribute)
            and (f.attr in LOG_LEVELS or f.attr in QUIET_LEVELS)
            and isinstance(f.value, ast.Name)
            and "log" in f.value.id.lower()
            and node.args
        ):
            msg = text_of(node.args[0])
            if msg is not None and literal_len(msg) >= 12:
                # logger.error("...%s", x) renders its args too.
                msg = re.sub(r"%[-+ 0#]*\d*(?:\.\d+)?[sdrfgixX]", "X", msg)
                kind = "log" if f.attr in LOG_LEVELS else QUIET_LEVELS[f.attr]
                self.emit(kind, node.lineno, self.func, None, msg)
        self.generic_visit(node)


def main(roots):
    for root in roots:
        for engine in ("vllm", "sglang"):
            pkg = os.path.join(root, engine)
            if not os.path.isdir(pkg):
                continue
            for dirpath, _, files in os.walk(pkg):
                for fn in sorted(files):
                    if not fn.endswith(".py"):
                        continue
                    full = os.path.join(dirpath, fn)
                    rel = os.path.relpath(full, root).replace(os.sep, "/")
                    group = next((g for g, rx in GROUPS[engine] if re.search(rx, rel)), None)
                    if group is None or "/tests/" in rel or "/test_" in rel:
                        continue
                    try:
                        tree = ast.parse(open(full, encoding="utf-8").read(), filename=rel)
                    except (SyntaxError, UnicodeDecodeError):
                        continue

                    def emit(kind, line, func, exc, msg, rel=rel, group=group, engine=engine):
                        print(json.dumps({"engine": engine, "group": group, "file": rel, "line": line,
                                          "function": func, "kind": kind, "exc": exc, "msg": msg}))

                    Visitor(emit).visit(tree)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
