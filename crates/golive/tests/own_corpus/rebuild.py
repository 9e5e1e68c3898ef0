#!/usr/bin/env python3
"""Rebuilds the own triage corpus (labels.tsv) from bare git mirrors.

usage: build.py LABELS.tsv MIRRORS_DIR OUT_DIR
A mirror of owner/name is looked for as MIRRORS_DIR/owner+name/repo, MIRRORS_DIR/owner+name or
MIRRORS_DIR/owner/name(.git). Prints a summary and the ids missing or mismatched."""
import hashlib, json, os, re, subprocess, sys

labels, mirrors, out = sys.argv[1:4]
os.makedirs(out, exist_ok=True)

def gitdir(repo):
    o, n = repo.split('/', 1)
    for c in (f"{o}+{n}/repo", f"{o}+{n}", f"{o}/{n}", f"{o}/{n}.git"):
        p = os.path.join(mirrors, c)
        if os.path.isdir(p):
            return p
    return None

def show(repo, commit, path):
    g = gitdir(repo)
    if not g:
        return None, "no mirror"
    r = subprocess.run(["git", "--git-dir", g, "show", f"{commit}:{path}"], capture_output=True)
    if r.returncode:
        return None, "git show failed: " + r.stderr.decode()[:100]
    return r.stdout, None

issues_cache = {}
ok, bad, miss = [], [], []
rows = [l.rstrip('\n').split('\t') for l in open(labels)][1:]
for c in rows:
    if len(c) < 10:
        continue
    rid, src, sha = c[0], c[7], c[9]
    data, err = None, None
    m = re.match(r'(\S+?)#(\d+) body code block (\d+).*via (\S+?):(\S+)@([0-9a-f]{40})', src)
    if m:
        repo_i, num, k, via, path, commit = m.groups()
        key = (via, path, commit)
        if key not in issues_cache:
            raw, err = show(via, commit, path)
            issues_cache[key] = json.loads(raw) if raw else None
        issues = issues_cache[key]
        if issues is not None:
            ent = [i for i in issues if i.get('number') == int(num)]
            if not ent:
                err = "issue not in dump"
            else:
                body = (ent[0].get('body') or '').replace('\r\n', '\n')
                blocks = re.findall(r'```[^\n]*\n(.*?)```', body, re.S)
                if int(k) < len(blocks):
                    data = blocks[int(k)].encode('utf-8')
                else:
                    err = "no such block"
    else:
        m = re.match(r'(\S+?/[^:]+):(.+)@([0-9a-f]{40})$', src)
        if not m:
            err = "unparsed source"
        else:
            data, err = show(m.group(1), m.group(3), m.group(2))
    if data is None:
        miss.append((rid, err, src.split(':')[0].split('#')[0]))
        continue
    open(os.path.join(out, f"{rid}.log"), 'wb').write(data)
    if hashlib.sha256(data).hexdigest() == sha:
        ok.append(rid)
    else:
        bad.append(rid)
print(f"ok {len(ok)}  sha mismatch {len(bad)}  missing {len(miss)}")
print("mismatch:", " ".join(bad))
for rid, err, repo in miss:
    print("missing", rid, repo, err)
