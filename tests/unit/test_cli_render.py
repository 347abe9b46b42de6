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
