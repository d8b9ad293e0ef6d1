"""Fetch, extract, clean and split the training corpus: Jane Austen's six novels.

Source: Debian's `r-cran-janeaustenr` package (the texts are from Project Gutenberg and in the
public domain; the R packaging is MIT-licensed, Julia Silge). The package stores each novel as an
R character vector (one hard-wrapped line per element) in a lazy-load database
(`data/Rdata.rdx` index + `data/Rdata.rdb` blocks). This script reads that format with the
standard library only: no R, no `rdata` package.

Output (in --out, default data/corpus):
  train.txt, heldout.txt   paragraphs unwrapped to one line each, chapters separated by "\n\n"
  split.json               which chapters went where

Held-out text is whole chapters (every 20th chapter of each novel, starting at the 10th),
so no held-out sentence was seen in training.

    python training/prepare_corpus.py [--deb PATH] [--out DIR]
"""
import argparse
import glob
import gzip
import json
import os
import re
import struct
import subprocess
import tempfile
import zlib

BOOKS = {  # R object name -> title
    "sensesensibility": "Sense and Sensibility",
    "prideprejudice": "Pride and Prejudice",
    "mansfieldpark": "Mansfield Park",
    "emma": "Emma",
    "northangerabbey": "Northanger Abbey",
    "persuasion": "Persuasion",
}


class XDRReader:
    """Just enough of R's XDR serialization format to read named lists and character vectors."""

    def __init__(self, buf: bytes):
        assert buf[:2] == b"X\n", "not an XDR-serialized R object"
        self.buf, self.pos, self.refs = buf, 2, []
        version = self.int()
        self.int(), self.int()  # writer and minimal reader R versions
        if version == 3:
            n = self.int()
            self.pos += n  # native encoding name

    def int(self) -> int:
        (v,) = struct.unpack_from(">i", self.buf, self.pos)
        self.pos += 4
        return v

    def item(self):
        flags = self.int()
        kind, has_attr, has_tag = flags & 0xFF, flags & (1 << 9), flags & (1 << 10)
        if kind == 254:  # NULL
            return None
        if kind == 255:  # reference to an earlier symbol
            idx = flags >> 8 or self.int()
            return self.refs[idx - 1]
        if kind in (241, 242, 253):  # base / empty / global environment
            return None
        if kind == 1:  # symbol
            name = self.item()
            self.refs.append(name)
            return name
        if kind == 2:  # pairlist: returns a dict (tag -> value)
            out = {}
            while kind == 2:
                if has_attr:
                    self.item()
                tag = self.item() if has_tag else len(out)
                out[tag] = self.item()
                flags = self.int()
                kind, has_attr, has_tag = flags & 0xFF, flags & (1 << 9), flags & (1 << 10)
            assert kind == 254, f"pairlist ended with type {kind}"
            return out
        if kind == 9:  # CHARSXP
            n = self.int()
            if n == -1:
                return None
            s = self.buf[self.pos:self.pos + n].decode("utf-8", "replace")
            self.pos += n
            return s
        if kind in (10, 13):  # logical, integer
            n = self.int()
            value = list(struct.unpack_from(f">{n}i", self.buf, self.pos))
            self.pos += 4 * n
        elif kind == 14:  # double
            n = self.int()
            value = list(struct.unpack_from(f">{n}d", self.buf, self.pos))
            self.pos += 8 * n
        elif kind in (16, 19):  # character vector, list
            value = [self.item() for _ in range(self.int())]
        else:
            raise ValueError(f"R type {kind} not supported")
        if has_attr:
            attrs = self.item()
            names = attrs.get("names") if isinstance(attrs, dict) else None
            if names and kind == 19:
                value = dict(zip(names, value, strict=False))
        return value


def read_lazyload(rdx_path: str, rdb_path: str) -> dict:
    index = XDRReader(gzip.open(rdx_path).read()).item()
    blob = open(rdb_path, "rb").read()
    out = {}
    for name, (offset, length) in index["variables"].items():
        block = blob[offset:offset + length]
        out[name] = XDRReader(zlib.decompress(block[4:])).item()  # 4-byte length, then zlib
    return out


def chapters(lines: list) -> list:
    """Split a novel's lines into chapters, each a list of unwrapped paragraphs."""
    result, paragraph, current = [], [], None
    heading = re.compile(r"^(CHAPTER|Chapter)\s+[0-9IVXLC]+\.?\s*$|^CHAPTER\s+\w+$")

    def end_paragraph():
        if paragraph and current is not None:
            text = " ".join(paragraph)
            text = re.sub(r"\s+", " ", text).strip()
            text = text.replace("_", "")  # the texts mark italics with underscores
            if text:
                current.append(text)
        paragraph.clear()

    for line in lines:
        line = (line or "").strip()
        if heading.match(line):
            end_paragraph()
            current = []
            result.append(current)
        elif not line:
            end_paragraph()
        else:
            paragraph.append(line)
    end_paragraph()
    return [c for c in result if c]


def fetch_deb(workdir: str) -> str:
    subprocess.run(["apt-get", "download", "r-cran-janeaustenr"], cwd=workdir, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return glob.glob(os.path.join(workdir, "r-cran-janeaustenr_*.deb"))[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--deb", help="path to r-cran-janeaustenr_*.deb (downloaded if absent)")
    ap.add_argument("--out", default="data/corpus")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        deb = args.deb or fetch_deb(tmp)
        subprocess.run(["dpkg-deb", "-x", deb, tmp], check=True)
        data = os.path.join(tmp, "usr/lib/R/site-library/janeaustenr/data")
        novels = read_lazyload(os.path.join(data, "Rdata.rdx"), os.path.join(data, "Rdata.rdb"))
    os.makedirs(args.out, exist_ok=True)
    train, heldout, split = [], [], {}
    for name, title in BOOKS.items():
        chs = chapters(novels[name])
        held = [i for i in range(len(chs)) if i % 20 == 9]
        split[title] = {"chapters": len(chs), "heldout_chapter_indices": held}
        for i, ch in enumerate(chs):
            (heldout if i in held else train).append("\n".join(ch))
    with open(os.path.join(args.out, "train.txt"), "w") as f:
        f.write("\n\n".join(train) + "\n")
    with open(os.path.join(args.out, "heldout.txt"), "w") as f:
        f.write("\n\n".join(heldout) + "\n")
    with open(os.path.join(args.out, "split.json"), "w") as f:
        json.dump(split, f, indent=1)
    n_train, n_held = sum(map(len, train)), sum(map(len, heldout))
    print(f"train: {len(train)} chapters, {n_train:,} chars; held-out: {len(heldout)} chapters, "
          f"{n_held:,} chars")


if __name__ == "__main__":
    main()
