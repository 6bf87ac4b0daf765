"""Which index finds more of what a zh-TW reader types, with fewer false hits (issue 45).

    .venv/bin/python benchmarks/zh_search_index.py      # after `make site`

Replays Sphinx 7.4's ``searchtools.js`` lookup (a one-word query: the word as an index term, and for
a word of more than 2 characters every term that contains it) over three indexes of the built zh-TW
pages' article text:

- ``before``: jieba with the dictionary of glossary terms, bold terms and the first search-terms.txt
  (7 words), and those words indexed only inside tokens longer than 3 characters;
- ``dictionary`` (what ``_ext/language_switch.py`` does): jieba with the edition's dictionary
  (``_build/i18n/zh_TW/book/search-dictionary.txt``) and each dictionary word indexed wherever a
  text holds it;
- ``n-grams``: jieba's tokens and every CJK n-gram of 2-6 characters.

Words: the glossary's and search-terms.txt's (tests/test_i18n_search.py), plus 位元, a word kept out
of the dictionary. False hits: pages found for a word that is there only as part of another word
(位元 and 元組 inside 位元組, 數量 inside 參數量, 行程 inside 執行程式).
"""

from __future__ import annotations

import json
import logging
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html" / "zh-tw"
DICTIONARY = ROOT / "_build" / "i18n" / "zh_TW" / "book" / "search-dictionary.txt"
CJK = "\u3400-\u9fff"
# a word -> the longer words it is only a part of (a page found through one of those is a false hit)
TRAPS = {"位元": ["位元組"], "元組": ["位元組"], "行程": ["執行程", "進行程"], "數量": ["參數量"]}
BEFORE_TERMS = ["鎖頁記憶體", "權重衰減", "次正規數", "重新計算", "注意力機率", "資料平行", "梯度累積"]


def article_texts() -> dict[str, str]:
    raw = (HTML / "searchindex.js").read_text(encoding="utf-8")
    docnames = json.loads(raw[raw.index("(") + 1: raw.rindex(")")])["docnames"]
    texts = {}
    for docname in docnames:
        text = (HTML / f"{docname}.html").read_text(encoding="utf-8")
        article = re.sub(r"<summary\b.*?</summary>", "", text[text.index("<article"):text.index("</article>")],
                         flags=re.DOTALL)
        texts[docname] = re.sub(r"<[^>]+>", "", article)
    return texts


def index(texts: dict[str, str], split) -> dict[str, set[str]]:
    terms: dict[str, set[str]] = {}
    for docname, text in texts.items():
        for word in split(text):
            if len(word.strip()) > 1:
                terms.setdefault(word.strip().lower(), set()).add(docname)
    return terms


def lookup(terms: dict[str, set[str]], word: str) -> set[str]:
    found = set(terms.get(word, ()))
    if len(word) > 2 and word not in terms:
        for term, pages in terms.items():
            if word in term:
                found |= pages
    return found


def main() -> int:
    if not (HTML / "searchindex.js").is_file():
        print(f"no zh-TW build at {HTML}: run `make site` first")
        return 1
    import jieba

    sys.path.insert(0, str(ROOT / "tests"))
    from test_i18n_search import search_list

    from autograder.i18n.checks import glossary_path, read_terms

    jieba.setLogLevel(logging.ERROR)
    texts = article_texts()
    words = [*search_list(), "位元"]
    glossary = {t.target for t in read_terms(glossary_path("zh_TW", ROOT))}
    import polib

    bold = {m for po in sorted((ROOT / "locales" / "zh_TW").rglob("*.po")) for e in polib.pofile(str(po))
            if e.msgstr and not e.obsolete for m in re.findall(rf"\*\*([{CJK}]{{2,5}})\*\*", e.msgstr)}
    before = sorted(w for w in glossary | bold | set(BEFORE_TERMS) if re.fullmatch(rf"[{CJK}]{{2,}}", w))
    dictionary = [line.split()[0] for line in DICTIONARY.read_text(encoding="utf-8").splitlines() if line.strip()]

    def with_dictionary(dict_words: list[str], everywhere: bool):
        tokenizer = jieba.Tokenizer()
        for word in dict_words:
            tokenizer.add_word(word)

        def split(text: str) -> list[str]:
            tokens = list(tokenizer.cut_for_search(text))
            if everywhere:
                return tokens + [w for w in dict_words if w in text]
            return tokens + [w for t in tokens if len(t) > 3 for w in dict_words if w != t and w in t]
        return split

    def ngrams(text: str) -> list[str]:
        tokens = list(jieba.cut_for_search(text))
        for run in re.findall(f"[{CJK}]+", text):
            tokens += [run[i:i + n] for n in range(2, 7) for i in range(len(run) - n + 1)]
        return tokens

    containing = {w: {d for d, t in texts.items() if w in t} for w in words}
    pairs = sum(len(c) for c in containing.values())
    print(f"{len(texts)} pages, {len(words)} words, {pairs} (word, page) pairs")
    for name, split in (("before", with_dictionary(before, False)),
                        ("dictionary", with_dictionary(dictionary, True)), ("n-grams", ngrams)):
        terms = index(texts, split)
        found = sum(len(lookup(terms, w) & containing[w]) for w in words)
        whole = sum(containing[w] <= lookup(terms, w) for w in words)
        false = 0
        for word, outer in TRAPS.items():
            real = {d for d, t in texts.items() if word in re.sub("|".join(outer), "", t)}
            false += len(lookup(terms, word) - real)
        print(f"{name:>10}: found {found}/{pairs} pairs, {whole}/{len(words)} words on every page that has "
              f"them, {false} false hits, {len(terms)} index terms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
