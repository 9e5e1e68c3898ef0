#!/usr/bin/env python3
"""measure.py LABELS LOGDIR [GOLIVE] [--fragments]: `golive triage` on each labelled log of a new
batch, before any rule changes for it; prints the misses and the totals (class, cause line within
2, healthy quiet, failed logs with no primary), and per split (`tune`, `held`) when the rows have
one. GOLIVE defaults to target/debug/golive.
--fragments: each failed log cut to the 8 lines before its cause line and the 6 after, as an issue
thread quotes a log (healthy logs are left out): how much triage leans on lines a quote drops."""
import json, subprocess, sys, os, tempfile
args = [a for a in sys.argv[1:] if a != '--fragments']
fragments = '--fragments' in sys.argv
labels, logdir = args[0], args[1]
binp = args[2] if len(args) > 2 else 'target/debug/golive'
rows = [l.rstrip('\n').split('\t') for l in open(labels)][1:]
tmp = tempfile.mkdtemp()


def fragment(path, line):
    """The failed log cut around its cause line, and the cause line's number in the cut."""
    lines = open(path, 'rb').read().split(b'\n')
    start = max(0, line - 1 - 8)
    cut = os.path.join(tmp, os.path.basename(path))
    open(cut, 'wb').write(b'\n'.join(lines[start:line + 6]) + b'\n')
    return cut, line - start


new = lambda: dict(failed=0, cls=0, line=0, none=0, healthy=0, quiet=0)
by_split = {}
for r in rows:
    if len(r) < 10: continue
    rid, outcome, cls, line = r[0], r[1], r[2], r[3]
    if fragments and outcome == 'healthy': continue
    s = by_split.setdefault(r[6], new())
    p = os.path.join(logdir, rid + '.log')
    if fragments:
        p, line = fragment(p, int(line))
    out = subprocess.run([binp, 'triage', '--format', 'json', p], capture_output=True, text=True)
    try:
        rep = json.loads(out.stdout)
    except Exception:
        rep = {'primary': None, 'secondary': ['error: ' + out.stderr[:200]]}
    pr = rep.get('primary')
    if outcome == 'healthy':
        s['healthy'] += 1
        q = pr is None and not rep.get('secondary')
        s['quiet'] += q
        if not q: print(f"{rid} healthy but {pr and (pr['class'], pr['line'], pr['rule'])} sec={len(rep.get('secondary') or [])}")
        continue
    s['failed'] += 1
    want = int(line)
    if not pr:
        s['none'] += 1; print(f"{rid} want {cls}@{want}: none"); continue
    c = pr['class'] == cls; l = abs(pr['line'] - want) <= 2
    s['cls'] += c; s['line'] += l
    if not (c and l): print(f"{rid} want {cls}@{want} got {pr['class']}@{pr['line']} ({pr['rule']}) [{r[5]}]")
summary = lambda t: f"class {t['cls']}/{t['failed']} line {t['line']}/{t['failed']} none {t['none']} quiet {t['quiet']}/{t['healthy']}"
for name in ('tune', 'held'):
    if name in by_split:
        print(f"{name}: {summary(by_split[name])}")
print(summary({k: sum(s[k] for s in by_split.values()) for k in new()}))
