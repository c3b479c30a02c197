"""Cluster text reaches the screen as plain, printable, bounded text."""
from gputui.sanitize import MAX_LOG_LINE, clean, log_line


def test_ansi_escapes_are_removed_and_markup_is_left_alone():
    assert log_line(b"\x1b[31mred\x1b[0m [bold]not bold[/]") == "red [bold]not bold[/]"


def test_osc_title_and_bidi_overrides_are_neutralised():
    assert clean("\x1b]0;pwned\x07name\u202eevil") == "name\ufffdevil"


def test_control_characters_become_caret_notation():
    assert log_line(b"bell\x07 nul\x00 bs\x08") == "bell^G nul^@ bs^H"


def test_invalid_utf8_is_replaced_not_raised():
    assert log_line(b"ok \xff\xfe end") == "ok \ufffd\ufffd end"


def test_tabs_and_line_endings():
    assert log_line(b"a\tb\r\n") == "a   b"
    assert clean("two\nlines\tand tab") == "two lines and tab"


def test_a_megabyte_line_is_cut_and_says_so():
    line = log_line(b"x" * 1_048_576)
    assert line.startswith("x" * MAX_LOG_LINE + " …")
    assert line.endswith("[line cut: 1,048,576 bytes]")
    assert len(line) < MAX_LOG_LINE + 40


def test_long_field_is_shortened_with_an_ellipsis():
    assert clean("n" * 600, limit=10) == "n" * 9 + "…"


BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
C1 = "".join(chr(c) for c in range(0x80, 0xA0))


def test_every_bidi_control_and_c1_control_is_neutralised_and_ordinary_text_is_not():
    from gputui.sanitize import printable

    for char in BIDI + C1:
        text = f"a{char}中"  # not "ab": U+009B b is a whole escape sequence (CSI), removed with its b
        for shown in (clean(text), log_line(text), log_line(text.encode()), printable(text)):
            assert char not in shown and shown.startswith("a") and shown.endswith("中"), (hex(ord(char)), shown)
    ordinary = "café naïve 中文 日本語 한국어 Ωμέγα ✓"
    assert clean(ordinary) == log_line(ordinary) == log_line(ordinary.encode()) == printable(ordinary) == ordinary
