"""recipes/bible/gold.py on hand-made OSIS verses (trimmed from RV1909 and KJV Acts 1:1); no SWORD modules needed."""

from __future__ import annotations

from scripts import load_script

gold = load_script("recipes/bible/gold.py", "bible_gold")

SPANISH = ('<w lemma="strong:G4413">primer</w> <w lemma="strong:G3056">tratado</w>, '
           '<w lemma="strong:G4160">he hablado</w> <w lemma="strong:G3956">de todas</w> '
           '<w lemma="strong:G2424">Jesús</w> <w lemma="strong:G4160">á hacer</w> '
           '<w lemma="strong:G2532">y</w> <w lemma="strong:G1321">á enseñar</w>, ')
ENGLISH = ('The <w lemma="strong:G4413">former</w> <w lemma="strong:G3056">treatise</w> have I '
           '<w lemma="strong:G4160">made</w>, <w lemma="strong:G3956">all</w> <w lemma="strong:G2424">Jesus</w> '
           'to <w lemma="strong:G4160">do</w> <w lemma="strong:G2532">and</w> '
           '<w lemma="strong:G1321">teach</w>, <w lemma="strong:G9999">extra</w>')


def test_tagged_words_tokenizes_and_groups():
    verse = gold.tagged_words(SPANISH)
    assert verse.words == "primer tratado , he hablado de todas Jesús á hacer y á enseñar ,".split()
    assert verse.groups[2] == (frozenset({"G4160"}), [3, 4])


def test_words_split_by_markup_stay_one_token_in_both_groups():
    verse = gold.tagged_words('<w lemma="strong:G1492">viéndo</w><w lemma="strong:G0846">lo</w> '
                              '<w lemma="strong:G2250">day</w>’s')
    assert verse.words == ["viéndolo", "day’s"]
    assert verse.groups == [(frozenset({"G1492"}), [0]), (frozenset({"G0846"}), [0]), (frozenset({"G2250"}), [1])]


def test_gold_links_sure_possible_and_unaligned():
    sure, possible = gold.gold_links(gold.tagged_words(SPANISH), gold.tagged_words(ENGLISH))
    # es: primer0 tratado1 ,2 he3 hablado4 de5 todas6 Jesús7 á8 hacer9 y10 á11 enseñar12 ,13
    # en: The0 former1 treatise2 have3 I4 made5 ,6 all7 Jesus8 to9 do10 and11 teach12 ,13 extra14
    assert sure == {(0, 1), (1, 2), (7, 8), (10, 11)}
    assert possible == {
        (5, 7), (6, 7),  # "de todas" <-> "all": a two-word group
        (11, 12), (12, 12),  # "á enseñar" <-> "teach"
        *((i, j) for i in (3, 4, 8, 9) for j in (5, 10)),  # G4160 twice in the verse: made, do
    }
    assert gold.format_gold({(0, 1)}, {(5, 7)}) == "0-1 5p7"
