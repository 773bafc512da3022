"""Tests for recipes/bible/extract.py that need no SWORD modules.

The markup samples are trimmed copies of real verses of the Debian modules
spaRV1909eb (RV1909), engKJV2006eb (KJV) and engWEB2015eb (WEB).
"""


import pytest
from scripts import load_script

extract = load_script("recipes/bible/extract.py", "bible_extract")
strip = extract.strip_markup


# --- strip_markup -----------------------------------------------------------------


def test_keeps_words_and_drops_strongs_attributes():
    raw = (
        'In the <w lemma="strong:H7225">beginning</w> <w lemma="strong:H0430">God</w> '
        '<w lemma="strong:H1254" morph="robinson:V-AAI-3S">created</w> the '
        '<w lemma="strong:H8064">heaven</w>. '
    )
    assert strip(raw) == "In the beginning God created the heaven."


def test_keeps_transchange_divinename_q_foreign_hi():
    raw = (
        '<q marker="" who="Jesus">the <divineName><w lemma="strong:H3068">LORD</w></divineName> '
        '<transChange type="added">is</transChange> my <w lemma="strong:H7462">shepherd</w>; '
        '<foreign>Eli</foreign> <hi type="italic">lama</hi></q> '
    )
    assert strip(raw) == "the LORD is my shepherd; Eli lama"


def test_removes_footnote_with_its_content():
    raw = (
        'the <w lemma="strong:H8451">law</w> of the <divineName><w lemma="strong:H3068">LORD</w></divineName>.'
        '<note placement="foot"><reference type="annotateRef">119.1 </reference>undefiled: or, perfect</note> '
        '<l eID="gen4635" level="1"/>'
    )
    assert strip(raw) == "the law of the LORD."


def test_note_between_words_leaves_a_space():
    raw = (
        '<w lemma="strong:H0430">God</w><note placement="foot"><reference type="annotateRef">1:1 </reference>'
        "The Hebrew word rendered “God” is “אֱלֹהִ֑ים” (Elohim).</note>"
        '<w lemma="strong:H1254">created</w>'
    )
    assert strip(raw) == "God created"


def test_verse_that_is_only_a_note_with_rdg_becomes_empty():
    raw = (
        '<div type="x-milestone" subType="x-preverse" sID="pv15188"/><div sID="gen34342" type="x-p"/>'
        '<note placement="foot"><reference type="annotateRef">8:37 </reference>TR adds '
        '<rdg type="alternate">Philip said, “If you believe with all your heart, you may.”</rdg></note>'
    )
    assert strip(raw) == ""


def test_cross_reference_note_removed():
    raw = (
        '“<w lemma="strong:G3004">To</w> your offspring”,<note type="crossReference">'
        '<reference subType="x-origin" type="annotateRef">3:16 </reference>'
        "<reference>Genesis 12:7; 13:15</reference></note> "
        '<w lemma="strong:G3739">which</w> is Christ. '
    )
    assert strip(raw) == "“To your offspring”, which is Christ."


def test_non_canonical_title_removed_canonical_title_kept():
    heading = (
        '<title><foreign>ב BETH.</foreign></title> <lg sID="gen4643"/> <l level="1" sID="gen4644"/>'
        'Wherewithal shall a young <w lemma="strong:H5288">man</w> cleanse his way?'
    )
    assert strip(heading) == "Wherewithal shall a young man cleanse his way?"
    psalm = (
        '<title canonical="true" type="psalm">A <w lemma="strong:H4210">Psalm</w> of David.</title> '
        '<lg sID="gen2897"/> <l level="1" sID="gen2898"/>The <divineName>LORD</divineName> '
        '<transChange type="added">is</transChange> my shepherd; <l eID="gen2898" level="1"/>'
    )
    assert strip(psalm) == "A Psalm of David. The LORD is my shepherd;"


def test_speaker_label_removed():
    raw = (
        '<speaker>Beloved</speaker> <lg sID="gen15617"/> <l level="1" sID="gen15618"/>Let '
        '<w lemma="strong:H3588">him</w> kiss me;<l eID="gen15618" level="1"/> <l level="2" sID="gen15619"/>'
        'for your love is better than wine. <l eID="gen15619" level="2"/>'
    )
    assert strip(raw) == "Let him kiss me; for your love is better than wine."


def test_line_tags_do_not_glue_words():
    raw = 'Yahweh is my shepherd;<l eID="a" level="1"/><l level="2" sID="b"/>I shall lack nothing.<lb type="x-p"/>'
    assert strip(raw) == "Yahweh is my shepherd; I shall lack nothing."


def test_unescapes_entities():
    assert strip("Jacob &amp; Esau said &quot;no&quot; &lt;sic&gt; &#233;") == 'Jacob & Esau said "no" <sic> é'


def test_normalises_whitespace_and_removes_pilcrows():
    raw = (
        '<div type="x-milestone" subType="x-preverse" sID="pv9"/><div sID="gen13" type="x-p"/> '
        '<div type="x-milestone" subType="x-preverse" eID="pv9"/>¶ <w lemma="strong:H0428">These</w>\t'
        "\n  are   the generations\u00a0of the heavens, "
    )
    assert strip(raw) == "These are the generations of the heavens,"


def test_removes_usfm_leftovers():
    raw = 'but by my <w lemma="strong:H8034">name</w> \\nd <w lemma="strong:H3068">JEHOVAH</w></divineName> was I'
    assert strip(raw) == "but by my name JEHOVAH was I"
    assert strip("the <divineName>LORD\\+nd* my banner") == "the LORD my banner"


def test_spanish_elements_glued_without_space_are_separated():
    raw = (
        '<w lemma="strong:H3808">AUNQUE no</w><transChange type="added">será esta</transChange>'
        '<w lemma="strong:H4155">oscuridad</w> tal'
    )
    assert strip(raw) == "AUNQUE no será esta oscuridad tal"


def test_spanish_enclitic_pronoun_stays_attached():
    raw = '<w lemma="strong:G3004">y hablándo</w><transChange type="added">les</transChange> del reino'
    assert strip(raw) == "y hablándoles del reino"
    raw = '<w lemma="strong:G2036">para decir</w><transChange type="added">les</transChange>'
    assert strip(raw) == "para decirles"
    raw = '<w lemma="strong:H3091">Josué</w><transChange type="added">los</transChange> circuncidó'
    assert strip(raw) == "Josué los circuncidó"


def test_word_split_across_w_elements_is_kept_whole():
    assert strip('it shall be <w lemma="strong:G1325">give</w>n unto you') == "it shall be given unto you"


def test_no_space_left_before_punctuation_after_removed_note():
    raw = (
        'paid the very last penny.</q> <note placement="foot"><reference type="annotateRef">12:59 </reference>'
        'literally, lepton.</note> <q marker="" who="Jesus">”</q>  <chapter eID="Luke.12"/>'
    )
    assert strip(raw) == "paid the very last penny.”"
    raw = 'Christ<note placement="foot">“Messiah” (Hebrew)</note>). '
    assert strip(raw) == "Christ)."


def test_space_between_nested_closing_quotes_is_kept():
    raw = '<q who="Jesus">‘Take up your mat and <w lemma="strong:G4043">walk</w>.’</q> ” <div eID="x" type="x-p"/>'
    assert strip(raw) == "‘Take up your mat and walk.’ ”"


def test_text_after_end_of_book_marker_is_cut():
    raw = (
        'with all the saints. Amen.  <chapter eID="Rev.22"/><div eID="gen35836" type="x-p"/> '
        '<div canonical="true" eID="gen35575" osisID="Rev" type="book"/> <div sID="gen35837" type="glossary"/> '
        '<title level="1" type="main">World English Bible Glossary</title> The following words used in the WEB'
    )
    assert strip(raw) == "with all the saints. Amen."


def test_output_has_no_markup_or_control_whitespace():
    raw = '<w lemma="strong:H0776">Y la tierra</w>\n<w lemma="strong:H1961">estaba</w>\r\n<milestone type="x"/>'
    text = strip(raw)
    assert text == "Y la tierra estaba"
    assert "<" not in text and "\t" not in text and "\n" not in text


# --- other pure helpers -------------------------------------------------------------


def test_spanish_colophon_removed_only_after_final_amen():
    verse = "La gracia sea con vosotros. Amén. Escrita de Roma á los Colosenses; enviada con Tichîco y Onésimo."
    assert extract.strip_spanish_colophon(verse) == "La gracia sea con vosotros. Amén."
    verse = "y diga todo el pueblo, Amén. Aleluya."
    assert extract.strip_spanish_colophon(verse) == verse
    assert extract.clean_verse("en", "Amen. Written from Rome.") == "Amen. Written from Rome."


def test_strongs_numbers():
    raw = '<w lemma="strong:G2424 G5547">que Jesucristo</w> <w lemma="strong:G1511" morph="x">es</w> el'
    assert extract.strongs_numbers(raw) == {"G2424", "G5547", "G1511"}
    assert extract.strongs_numbers("plain text") == frozenset()


def _verse(number, es, en, es_numbers, en_numbers):
    return extract.AlignedVerse(
        ref=extract.VerseRef("Numbers", 13, number),
        texts={"es": es, "en": en, "web": en},
        strongs={"es": frozenset(es_numbers), "en": frozenset(en_numbers)},
    )


def test_find_misaligned_detects_a_shifted_run():
    en_numbers = [{"H1", "H2", "H3"}, {"H4", "H5", "H6"}, {"H7", "H8", "H9"}, {"H10", "H11", "H12"}]
    aligned = [_verse(i, "es", "en", n, n) for i, n in enumerate(en_numbers[:2], start=1)]
    shifted = [_verse(3, "es", "en", en_numbers[1], en_numbers[2]), _verse(4, "es", "en", en_numbers[2], en_numbers[3])]
    assert extract.find_misaligned(aligned + shifted) == {2, 3}


def test_find_misaligned_detects_verse_that_absorbed_an_empty_slot():
    verses = [
        _verse(1, "a", "a", {"H1", "H2"}, {"H1", "H2"}),
        _verse(2, "b", "b", {"H3", "H4", "H5", "H6"}, {"H3", "H4"}),
        _verse(3, "", "c", set(), {"H5", "H6"}),
    ]
    assert extract.find_misaligned(verses) == {1}


def test_select_verses_drops_empty_and_misaligned():
    verses = [
        _verse(1, "a", "a", {"H1", "H2"}, {"H1", "H2"}),
        _verse(2, "", "b", set(), {"H3"}),
        _verse(3, "c", "c", {"H4"}, {"H4"}),
    ]
    kept = extract.select_verses(verses, check_alignment=True)
    assert [str(v.ref) for v in kept] == ["Numbers 13:1", "Numbers 13:3"]


def test_split_of():
    assert extract.split_of("Judges") == "dev"
    assert extract.split_of("Acts") == "test"
    assert extract.split_of("Genesis") == "train"


def test_write_lines_atomic(tmp_path):
    target = tmp_path / "train.es"
    extract.write_lines_atomic(target, ["uno", "dos"])
    assert target.read_bytes() == b"uno\ndos\n"
    with pytest.raises(ValueError):
        extract.write_lines_atomic(target, ["tres\tcuatro"])
    assert target.read_text(encoding="utf-8") == "uno\ndos\n"
    assert [p.name for p in tmp_path.iterdir()] == ["train.es"]


def test_missing_module_gives_one_line_error(tmp_path, capsys):
    pytest.importorskip("pysword")
    (tmp_path / "mods.d").mkdir()
    assert extract.main(["--out", str(tmp_path / "out"), "--sword-path", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: SWORD module spaRV1909eb not found under ")
    assert "sword-text-sparv" in err and "apt-get install" in err
    assert "\n" not in err
