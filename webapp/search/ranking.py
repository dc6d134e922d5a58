"""The declared ranking: which rules order the results, in which order, and their constants.

In the spirit of Meilisearch's ranking rules: a document is compared with another by the first
rule that tells them apart. The Tantivy backend turns the rules into one score per document
(a mixed-radix number, see `units`); the Meilisearch adapter maps them to its `rankingRules`.
docs/relevance.md explains each rule and constant and what was measured.
"""

from __future__ import annotations

from dataclasses import dataclass

# The rules, most important first. Each is a count over the query's words (slots):
#   words      query words matched at all (exactly, by stem, as a prefix or with typos);
#              with matching_strategy `last`, the number of leading words matched
#   typo       2 for a word matched without a typo, 1 with one typo, 0 with two
#   proximity  neighbouring query words found within PROXIMITY_SLOP words of each other in
#              the title, the file name or the text (in the title also by their stems:
#              `Signed contract` for `sign contract`)
#   attribute  words matched in a name: the title (an e-mail's subject), the file name; a
#              word matched by a typo form only counts its typo form there
#   (a typo-only word's score is the BM25F of its one-typo forms the index holds)
#   exactness  words matched in the form typed (not only by stem or prefix)
#   score      BM25F: per-field BM25 of the word's stem (its form typed in a file name or a
#              path; a phrase's words as typed), weighted by FIELD_WEIGHTS
RULES = ("words", "typo", "proximity", "attribute", "exactness", "score")
# Meilisearch's own rule of each (`sort` goes first there, so an explicit sort wins).
MEILI_RULES = {
    "words": "words",
    "typo": "typo",
    "proximity": "proximity",
    "attribute": "attribute",
    "exactness": "exactness",
}

# BM25F field weights (a sum of per-field BM25, as Tantivy scores each field on its own).
# A title nearly always stands in the text too (a heading, an e-mail's subject line), so
# its words already count twice: its own weight is small (0.25 measured best of 0, 0.25,
# 0.5, 1.0 and 1.5 on both halves of CISI's questions and three-word queries). A file
# name or a path is not in the text: a match there counts in full and more.
FIELD_WEIGHTS = {"title": 0.25, "basename": 1.5, "path": 1.2, "content": 1.0}
# The fields a word is scored in by its stem (every form of it, written at index time): the
# stemmed copy of each. File names and paths are scored by the form typed.
STEMMED = {"title": "title_stem", "content": "content_stem"}
NAME_FIELDS = ("title", "basename")
PROXIMITY_FIELDS = ("title", "basename", "content")
PROXIMITY_SLOP = 2  # neighbouring words at most this many positions apart are near
# Room left for the score under the last counted rule: BM25F of one document stays below it
# (a CISI question's best document scores about 60; a typed query's about 25).
SCORE_ROOM = 256.0
# f32 scores keep 24 bits: the whole mixed-radix number must stay below this for the score
# under it to keep a resolution of SCORE_ROOM / 1024 (see ruled()).
F32_EXACT = float(2**24)


@dataclass(frozen=True)
class Units:
    """What one step of each counted rule adds to a document's score, for one query."""

    words: float
    typo: float
    proximity: float
    attribute: float
    exactness: float


def _ranges(slots: int) -> dict[str, int]:
    """The largest value each counted rule can take for a query of `slots` words."""
    return {
        "words": slots,
        "typo": 2 * slots,
        "proximity": max(0, slots - 1),
        "attribute": slots,
        "exactness": slots,
    }


def units(slots: int) -> Units:
    """Mixed-radix units: one step of a rule outweighs all the rules after it at their
    largest, so the score orders documents by the rules in RULES order."""
    ranges = _ranges(slots)
    step, out = SCORE_ROOM, {}
    for rule in reversed(RULES[:-1]):
        out[rule] = step
        step *= ranges[rule] + 1
    return Units(**out)


def top(slots: int) -> float:
    """The largest score the counted rules can give a query of `slots` words."""
    u, r = units(slots), _ranges(slots)
    return sum(getattr(u, rule) * r[rule] for rule in RULES[:-1]) + SCORE_ROOM


def _largest_ruled() -> int:
    """The most query words whose rule counts fit a 32-bit float score (see F32_EXACT)."""
    n = 1
    while top(n + 1) * 1024 <= F32_EXACT * SCORE_ROOM:
        n += 1
    return n


# A query of more words is ranked by the score alone. Counting matched words lets frequent
# words outweigh rare ones: on CISI the rules cost 0.015 nDCG@10 on three-word queries
# (0.186 against 0.201 by BM25F alone) and more on questions, and an outside measurement found the
# same on two hidden collections (0.93x and 0.98x of BM25 with word buckets on three-word
# queries). One or two typed words are what the rules are for (`invoce`, `sign contract`).
RULED_MAX_WORDS = 2
assert RULED_MAX_WORDS <= _largest_ruled()  # the counts must fit a 32-bit score


# A word of a longer query (ranked by BM25F alone) held by more than this share of the texts
# is left out of it while another of its words is held (`the`, `of`, `is` in a question):
# Robertson and Sparck Jones's weight of such a word, log((N - n + 0.5) / (n + 0.5)), is zero
# or below; the BM25 of Tantivy and Lucene keeps it above zero by adding 1 inside the log, but
# under log 2, so it moves the order little (CISI, docs/relevance.md), while reading its
# posting list, nearly every document, was most of a question's time at a million documents.
COMMON_WORD_SHARE = 0.5


# A word the texts the asker may see hold, as typed, in more than this many documents gets no
# typo or prefix forms in the text (in a title or a file name it keeps them): it is typed as
# written. A search for it alone then lists those documents first, on ten pages of the
# largest `limit` (100), with or without them (a text matched by a form ranks below every
# text matched as typed, by `typo` or `exactness`), and those forms were the largest part of
# a one- or two-word query's time at a million documents (a common word's one-typo
# neighbours are its inflections and other common words: `named`, in 94,000 texts, has
# one-typo forms in 471,000).
TYPED_RIGHT_DOCS = 1_000


def ruled(slots: int) -> bool:
    """True when a query of `slots` words is ordered by the counted rules before its score."""
    return 0 < slots <= RULED_MAX_WORDS
