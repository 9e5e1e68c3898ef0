#!/usr/bin/env python3
"""merge.py STAGE_LABELS STAGE_DIR [--labels LABELS.tsv] [--logs DIR]: appends a labelled batch to
labels.tsv. Each new row gets the next id and its split by the README's rule (within each outcome,
new logs in sha256 order join the half with fewer logs of that outcome; tie -> tune); existing rows
never move. The batch's files are checked against their sha256 and copied to DIR/<id>.log. Rows whose
sha256 is already listed are skipped."""
import argparse, hashlib, os, shutil, sys

ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
ap.add_argument('stage_labels')
ap.add_argument('stage_dir')
ap.add_argument('--labels', default=os.path.join(os.path.dirname(os.path.abspath(__file__)), 'labels.tsv'))
ap.add_argument('--logs', default='/work/owncorpus/logs')
a = ap.parse_args()

lines = open(a.labels).read().rstrip('\n').split('\n')
header, rows = lines[0], [l.split('\t') for l in lines[1:]]
known = {r[9] for r in rows}
count = {}
for r in rows:
    count[(r[1], r[6])] = count.get((r[1], r[6]), 0) + 1
next_id = max(int(r[0]) for r in rows) + 1
new = []
for l in open(a.stage_labels).read().rstrip('\n').split('\n')[1:]:
    r = l.split('\t')
    if len(r) != 10:
        sys.exit(f"row {r[0]!r}: {len(r)} columns, want 10")
    data = open(os.path.join(a.stage_dir, r[0] + '.log'), 'rb').read()
    if hashlib.sha256(data).hexdigest() != r[9]:
        sys.exit(f"row {r[0]}: sha256 does not match its file")
    if r[9] in known:
        print(f"skip {r[0]}: already listed", file=sys.stderr)
        continue
    known.add(r[9])
    new.append((r, data))
new.sort(key=lambda x: (x[0][1], x[0][9]))
os.makedirs(a.logs, exist_ok=True)
out = []
for r, data in new:
    outcome = r[1]
    tune, held = count.get((outcome, 'tune'), 0), count.get((outcome, 'held'), 0)
    split = 'tune' if tune <= held else 'held'
    count[(outcome, split)] = count.get((outcome, split), 0) + 1
    stage_id = r[0]
    r[0], r[6] = f"{next_id:03d}", split
    next_id += 1
    open(os.path.join(a.logs, r[0] + '.log'), 'wb').write(data)
    out.append('\t'.join(r))
    print(f"{stage_id} -> {r[0]} {outcome} {split}")
with open(a.labels, 'a') as f:
    for l in out:
        f.write(l + '\n')
print(f"added {len(out)} rows", file=sys.stderr)
