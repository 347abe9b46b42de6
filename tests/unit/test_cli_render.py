"""The CLI's one renderer of errors."""

import pytest

from tritonkit.cli import render
from tritonkit.errors import TritonKitError


def test_render_error_keeps_square_brackets_when_message_looks_like_markup(
    capsys: pytest.CaptureFixture[str],
) -> None:
    render.error(TritonKitError("input 'X' expects shape [batch, 4] [/]", hint="use [N, 4]"))
    err = capsys.readouterr().err
    assert "[batch, 4] [/]" in err
    assert "use [N, 4]" in err


def test_render_keeps_emoji_codes_and_markup_from_user_text_literal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """File names, model names and messages reach the console as they are: ``:100:`` (a line
    number after a file name) is no emoji code, ``[bold]`` no markup, on every renderer."""
    text = "config.pbtxt:100: info: [bold]x[/bold] :smile:"
    render.info(text)
    render.note(text)
    render.warn(text)
    render.error(TritonKitError(text, hint=text))
    render.table(text, [text], [[text]])
    captured = capsys.readouterr()
    printed = captured.out + captured.err
    # info, note, warn, the error and its hint, the table's title, column and cell
    assert printed.count(text) == 8
    assert "💯" not in printed and "😄" not in printed
