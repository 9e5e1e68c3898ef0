#!/usr/bin/env python3
"""Rebuild the own triage corpus (labels.tsv) byte for byte from bare git mirrors and verify sha256.

usage: rebuild.py [--labels LABELS.tsv] [--mirrors DIR] [--out DIR]
       rebuild.py LABELS.tsv MIRRORS_DIR OUT_DIR        (positional form, same meaning)

--labels   labels.tsv (default: the labels.tsv next to this script)
--mirrors  a folder of bare clones (default /work/.mirror). A clone of owner/name is looked for as
           DIR/owner+name or DIR/owner/name (also name.git), each possibly holding the git dir one
           level down: .../repo (bare, the layout the `fetch` tool produces) or .../repo/.git (a
           clone with a work tree) or .../.git.
--out      where <id>.log files are written (default /work/owncorpus/logs).

Sources (see README.md): `owner/repo:path@commit` is `git show commit:path`, bytes as they are;
`owner/repo#N body code block K (...); via V:PATH@COMMIT` is the entry with number N in the issues
JSON list V:PATH@COMMIT, field body, CRLF->LF, re.findall(r'```[^\\n]*\\n(.*?)```', body, re.S)[K],
written as UTF-8; `owner/repo#N issue code block K (...); via V:PATH@COMMIT` is block K (same
expression, CRLF->LF) of the Markdown file V:PATH@COMMIT that archives issue N with its comments
(ik_llama.cpp's github-data/issues/; `pull request` and `discussion` blocks alike);
`owner/repo:PATH@COMMIT markdown code block K (...)` is block K (same expression, CRLF->LF) of a
Markdown file committed to a repository (a write-up that pastes the log). Every file is checked against the sha256 column; prints a summary (built OK / sha
mismatch / source missing, by source kind) and the ids that failed with the reason. Exit code 1 if
any log is missing or mismatched."""
import argparse, hashlib, json, os, re, subprocess, sys

ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
ap.add_argument('pos', nargs='*', help='LABELS MIRRORS OUT (optional positional form)')
ap.add_argument('--labels', default=os.path.join(os.path.dirname(os.path.abspath(__file__)), 'labels.tsv'))
ap.add_argument('--mirrors', default='/work/.mirror')
ap.add_argument('--out', default='/work/owncorpus/logs')
a = ap.parse_args()
if a.pos:
    if len(a.pos) != 3:
        ap.error('positional form needs LABELS MIRRORS OUT')
    a.labels, a.mirrors, a.out = a.pos
if not os.path.isfile(a.labels):  # build.py copy outside the repo: fall back to the repo's labels
    alt = '/work/main/crates/golive/tests/own_corpus/labels.tsv'
    if os.path.isfile(alt):
        a.labels = alt
os.makedirs(a.out, exist_ok=True)


def is_gitdir(p):
    return os.path.isfile(os.path.join(p, 'HEAD')) and os.path.isdir(os.path.join(p, 'objects'))


def gitdir(repo):
    o, n = repo.split('/', 1)
    for base in (f"{o}+{n}", f"{o}+{n}.git", f"{o}/{n}", f"{o}/{n}.git"):
        for sub in ('', 'repo', 'repo/.git', '.git'):
            p = os.path.join(a.mirrors, base, sub)
            if is_gitdir(p):
                return p
    return None


def code_block(text, k, where):
    """Fenced code block k of Markdown `text` (CRLF->LF, fences excluded) as UTF-8 bytes, or the
    reason there is none (`where` names the text: body, file)."""
    blocks = re.findall(r'```[^\n]*\n(.*?)```', text.replace('\r\n', '\n'), re.S)
    if k < len(blocks):
        return blocks[k].encode('utf-8'), None
    return None, f"no code block {k} ({where} has {len(blocks)})"


def markdown_block(repo, commit, path, k):
    """Code block k of a Markdown file committed to `repo`."""
    raw, err = show(repo, commit, path)
    if raw is None:
        return None, err
    return code_block(raw.decode('utf-8'), k, 'file')


def show(repo, commit, path):
    g = gitdir(repo)
    if not g:
        return None, "no mirror of " + repo
    r = subprocess.run(["git", "--git-dir", g, "show", f"{commit}:{path}"], capture_output=True)
    if r.returncode:
        return None, "git show failed: " + r.stderr.decode(errors='replace').strip()[:120]
    return r.stdout, None


issues_cache = {}
res = {}  # kind -> {'ok': [], 'bad': [], 'miss': []}
fails = []
rows = [l.rstrip('\n').split('\t') for l in open(a.labels, encoding='utf-8')][1:]
for c in rows:
    if len(c) < 10:
        continue
    rid, src, sha = c[0], c[7], c[9]
    data, err = None, None
    m = re.match(r'(\S+?)#(\d+) body code block (\d+).*via (\S+?):(\S+)@([0-9a-f]{40})', src)
    if m:
        kind = 'issue-body'
        _, num, k, via, path, commit = m.groups()
        key = (via, path, commit)
        if key not in issues_cache:
            raw, e = show(via, commit, path)
            issues_cache[key] = (json.loads(raw) if raw else None, e)
        issues, err = issues_cache[key]
        if issues is not None:
            ent = [i for i in issues if i.get('number') == int(num)]
            if not ent:
                err = f"issue {num} not in dump"
            else:
                data, err = code_block(ent[0].get('body') or '', int(k), 'body')
    elif re.match(r'\S+?#\d+ (issue|pull request|discussion) code block', src):
        # An issue, pull request or discussion archived as a Markdown file in the project's own
        # repository (ik_llama.cpp's github-data/): block K over the whole file, comments included.
        kind = 'issue-archive'
        m = re.match(r'(\S+?)#(\d+) (?:issue|pull request|discussion) code block (\d+) \(.*?\); via (\S+?):(.+)@([0-9a-f]{40})$', src)
        if not m:
            err = "unparsed source"
        else:
            _, _, k, via, path, commit = m.groups()
            data, err = markdown_block(via, commit, path, int(k))
    elif ' markdown code block ' in src:
        kind = 'markdown-file'
        m = re.match(r'(\S+?/[^:]+):(.+)@([0-9a-f]{40}) markdown code block (\d+) \(', src)
        if not m:
            err = "unparsed source"
        else:
            data, err = markdown_block(m.group(1), m.group(3), m.group(2), int(m.group(4)))
    else:
        kind = 'committed-file'
        m = re.match(r'(\S+?/[^:]+):(.+)@([0-9a-f]{40})$', src)
        if not m:
            err = "unparsed source"
        else:
            data, err = show(m.group(1), m.group(3), m.group(2))
    r = res.setdefault(kind, {'ok': [], 'bad': [], 'miss': []})
    if data is None:
        r['miss'].append(rid)
        fails.append((rid, 'missing', err))
        continue
    with open(os.path.join(a.out, f"{rid}.log"), 'wb') as f:
        f.write(data)
    if hashlib.sha256(data).hexdigest() == sha:
        r['ok'].append(rid)
    else:
        r['bad'].append(rid)
        fails.append((rid, 'sha mismatch', src))

tot = {k: sum(len(r[k]) for r in res.values()) for k in ('ok', 'bad', 'miss')}
for kind, r in sorted(res.items()):
    print(f"{kind:15s} built OK {len(r['ok']):4d}  sha mismatch {len(r['bad']):3d}  source missing {len(r['miss']):3d}")
print(f"{'all':15s} built OK {tot['ok']:4d}  sha mismatch {tot['bad']:3d}  source missing {tot['miss']:3d}  -> {a.out}")
for rid, what, why in fails:
    print(f"{rid}\t{what}\t{why}")
sys.exit(1 if fails else 0)
