"""The language of a document's text, for its stemmed fields: a count of function words.

Cheap by design (it runs for every indexed document): the first SAMPLE_CHARS characters are
split into words and each language scores the share of them that are among its most frequent
function words; the best language wins when it holds at least MIN_SHARE of the words and beats
English. Otherwise (short texts, code, numbers) the text counts as English, the stemmer
used for every document until a better one is known. Only languages Tantivy ships a Snowball
stemmer for are named. Accuracy and cost are measured in docs/relevance.md.
"""

from __future__ import annotations

from collections import Counter

DEFAULT = "english"
SAMPLE_CHARS = 2_000
MIN_SHARE = 0.08  # of a sample's words: natural prose is 20-45% function words

# Frequent function words of each language, lower case (ambiguous ones across languages,
# such as `de` or `a`, are left out where they would blur two neighbours).
FUNCTION_WORDS = {
    "english": "the and of to in is that it for was with as on are this be by not have from",
    "french": "le la les des est une dans qui pour pas que sur au avec sont du ce il elle",
    "german": "der die das und ist nicht ein eine mit den dem zu sich auf auch es für von",
    "spanish": "el los las del que y una por con para es se lo como su al más pero",
    "italian": "il che di della gli una per con non sono del le è alla nel dei anche",
    "portuguese": "o os as do da que não uma com para em dos das é se ao pelo",
    "dutch": "de het een en van is dat niet op te zijn met voor er ook als",
    "swedish": "och att det som en är på för med av inte till den har om jag",
    "danish": "og at det som en er på for med af ikke til den har de jeg",
    "russian": "и в не на что с по как это он она из за от для но",
}
_LANGS_OF: dict[str, list[str]] = {}
for _lang, _words in FUNCTION_WORDS.items():
    for _word in _words.split():
        _LANGS_OF.setdefault(_word, []).append(_lang)


def detect(text: str | None) -> str:
    """The Snowball language name of `text` (DEFAULT when unsure)."""
    if not text:
        return DEFAULT
    # words of letters only (timestamps and numbers are not language); a word beside
    # punctuation is not counted
    words = [w for w in text[:SAMPLE_CHARS].lower().split() if w.isalpha()]
    if len(words) < 20:
        return DEFAULT
    counts = dict.fromkeys(FUNCTION_WORDS, 0)
    seen = Counter(words)  # counted in C; only the function words among them are looked at
    for word in seen.keys() & _LANGS_OF.keys():
        for lang in _LANGS_OF[word]:
            counts[lang] += seen[word]
    best = max(counts, key=lambda lang: counts[lang])
    if counts[best] < MIN_SHARE * len(words) or counts[best] <= counts[DEFAULT]:
        return DEFAULT
    return best
