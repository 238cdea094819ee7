"""Do two versions of the code give the same processed tables, figures and paper inputs from the same data?

A refactoring check, not a test: it re-analyses a copy of the committed reference (``data/reference``)
with the code it is run with, draws the figures and the paper's generated inputs into an output folder,
and writes one digest per output file. The commit and dirty flag (PDF/PNG metadata, provenance) and the
temporary paths are masked, so two versions compare equal when they differ only there.

    python benchmarks/same_outputs.py record /tmp/before.json      # on the old code
    python benchmarks/same_outputs.py record /tmp/after.json       # on the new code
    python benchmarks/same_outputs.py compare /tmp/before.json /tmp/after.json

`record` prints the time it took; `compare` prints every file that differs, is missing or is new, and
exits 1 when any does.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HEX40 = re.compile(rb"\b[0-9a-f]{40}\b")
DIRTY = re.compile(rb'("dirty":\s*)(true|false|null)')
COMMIT_MACRO = re.compile(rb"([Gg]itCommit\}\{)[0-9a-f]+\}")


def _png_canonical(data: bytes) -> bytes:
    """PNG bytes with text chunks masked (their CRC depends on the commit) and other chunks kept."""
    out, i = [data[:8]], 8
    while i < len(data):
        n = int.from_bytes(data[i:i + 4], "big")
        kind, body = data[i + 4:i + 8], data[i + 8:i + 8 + n]
        if kind in (b"tEXt", b"iTXt", b"zTXt"):
            body = HEX40.sub(b"COMMIT", body)
            out.append(kind + body)
        elif kind == b"IDAT":
            out.append(kind + hashlib.sha256(body).digest())
        else:
            out.append(kind + body + zlib.crc32(kind + body).to_bytes(4, "big"))
        i += 12 + n
    return b"".join(out)


def canonical(path: Path, tmp_roots: list[str]) -> bytes:
    data = path.read_bytes()
    if path.suffix == ".png":
        return _png_canonical(data)
    data = HEX40.sub(b"0" * 40, data)  # same length: PDF cross-reference offsets stay valid
    data = DIRTY.sub(rb"\1DIRTY", data)
    data = COMMIT_MACRO.sub(rb"\1COMMIT}", data)
    for root in tmp_roots:
        data = data.replace(root.encode(), b"<TMP>")
    return data


def run(cmd: list[str], env: dict[str, str]) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, env=env, cwd=REPO)


def record(out_json: Path, profile: str, keep: Path | None) -> None:
    work = Path(tempfile.mkdtemp(prefix="dbmatrix-same-"))
    data, out = work / "data", work / "out"
    shutil.copytree(REPO / "data" / "reference", data,
                    ignore=shutil.ignore_patterns("processed", "notebooks"))
    env = {**os.environ, "MPLBACKEND": "Agg"}
    dbm = [sys.executable, "-m", "dbmatrix"]
    t0 = time.monotonic()
    run([*dbm, "analyse", "--profile", profile, "--data", str(data)], env)
    t1 = time.monotonic()
    run([*dbm, "figures", "--profile", profile, "--data", str(data), "--out", str(out)], env)
    t2 = time.monotonic()
    digests: dict[str, str] = {}
    roots = [str(work.resolve()), str(work)]
    for base, sub in ((data, "data"), (out, "out")):
        for p in sorted(base.rglob("*")):
            if p.is_file() and (sub == "out" or "/processed/" in str(p)):
                digests[f"{sub}/{p.relative_to(base)}"] = hashlib.sha256(canonical(p, roots)).hexdigest()
    out_json.write_text(json.dumps({"profile": profile, "files": digests,
                                    "analyse_s": round(t1 - t0, 1), "figures_s": round(t2 - t1, 1)},
                                   indent=1, sort_keys=True) + "\n")
    print(f"{len(digests)} files; analyse {t1 - t0:.1f} s, figures {t2 - t1:.1f} s -> {out_json}")
    if keep:
        shutil.rmtree(keep, ignore_errors=True)
        shutil.move(str(work), keep)
        print(f"outputs kept in {keep}")
    else:
        shutil.rmtree(work)


def compare(a: Path, b: Path) -> int:
    fa, fb = json.loads(a.read_text())["files"], json.loads(b.read_text())["files"]
    bad = 0
    for name in sorted(set(fa) | set(fb)):
        if name not in fb:
            print(f"missing in {b.name}: {name}")
        elif name not in fa:
            print(f"new in {b.name}: {name}")
        elif fa[name] != fb[name]:
            print(f"differs: {name}")
        else:
            continue
        bad += 1
    print(f"{len(set(fa) & set(fb)) - sum(fa[n] != fb[n] for n in set(fa) & set(fb))} identical, {bad} differ")
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("out", type=Path)
    r.add_argument("--profile", default="quick")
    r.add_argument("--keep", type=Path, help="keep the data copy and outputs in this folder")
    c = sub.add_parser("compare")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    args = ap.parse_args()
    if args.cmd == "record":
        record(args.out, args.profile, args.keep)
        return 0
    return compare(args.a, args.b)


if __name__ == "__main__":
    sys.exit(main())
