"""Stage 2's on-disk store of cleaned texts returns exactly what was put in, the last write winning."""

from pathlib import Path

from minideepseek.crossdedup.textstore import TextStore


def test_round_trip_overwrite_and_cleanup(tmp_path: Path) -> None:
    st = TextStore(tmp_path / "work")
    texts = {0: "plain ascii", 7: "中文，全角。", 3: "lone \ud800 surrogate and \x00 NUL", 9: "", 4: "e\u0301" * 1000}
    for i, t in texts.items():
        st[i] = t
    st[0] = "rewritten again"  # a second rewrite of the same document
    texts[0] = "rewritten again"
    assert len(st) == len(texts) and bool(st) and 5 not in st and st.get(5) is None
    for i, t in texts.items():
        assert i in st and st[i] == t and st.get(i) == t and st.chars(i) == len(t)
    assert sorted(st.keys()) == sorted(texts) and st.total_chars() == sum(map(len, texts.values()))
    assert st.path.is_file()
    st.close()
    assert not st.path.exists()
    assert not TextStore(tmp_path / "other")  # empty: falsy, like the dict it replaces
