"""image_url parts: data: URLs decoded and checked; http(s) only from the allow-list.

The allow-list is exercised against a real HTTP server on 127.0.0.1 (no network here).
"""

from __future__ import annotations

import asyncio
import base64
import io
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from PIL import Image

from tritonkit.errors import ConfigError
from tritonkit.openai_front import Limits, OpenAIError, UrlAllowList
from tritonkit.openai_front.images import ImageFetcher, check_image, decode_data_url
from tritonkit.openai_front.requests import ImagePart


def _png(width: int = 8, height: int = 8) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (200, 10, 10)).save(out, format="PNG")
    return out.getvalue()


PNG = _png()
DATA_URL = "data:image/png;base64," + base64.b64encode(PNG).decode()


class _Images(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path.startswith("/public/"):
            body = PNG if self.path.endswith(".png") else b"not an image"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif self.path == "/moved":
            self.send_response(302)
            self.send_header("Location", "/public/a.png")
            self.end_headers()
        else:
            self.send_response(404)
            self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def image_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Images)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _load(url: str, allow: tuple[str, ...] = (), limits: Limits | None = None) -> bytes:
    fetcher = ImageFetcher(limits=limits or Limits(), allow=UrlAllowList(allow))
    return asyncio.run(fetcher.load([ImagePart(url, "messages[0].content[1].image_url")]))[0]


def test_data_url_is_decoded_to_the_image_bytes() -> None:
    assert _load(DATA_URL) == PNG
    assert (
        decode_data_url(
            "data:image/png;base64,"
            + base64.b64encode(PNG).decode()[:8]
            + "\n"
            + base64.b64encode(PNG).decode()[8:],
            param="p",
            max_bytes=10**6,
        )
        == PNG
    )


@pytest.mark.parametrize(
    ("url", "status", "words"),
    [
        ("data:image/png;base64,@@@@", 400, "base64"),
        ("data:image/png;base64", 400, "no ','"),
        ("data:text/plain;base64,aGk=", 400, "not an image"),
        ("data:image/png;base64," + base64.b64encode(b"plain text, no image").decode(), 400, "not an image"),
        ("data:image/png;base64,", 400, "empty"),
        ("ftp://example.com/a.png", 400, "data: URL or an http(s) URL"),
        ("https://example.com/a.png", 400, "allow-list"),
    ],
)
def test_bad_image_urls_are_refused_naming_the_part(url: str, status: int, words: str) -> None:
    with pytest.raises(OpenAIError) as caught:
        _load(url)
    assert caught.value.status == status and words in caught.value.message
    assert caught.value.param == "messages[0].content[1].image_url"


def test_image_bytes_and_pixels_past_the_limits_are_413() -> None:
    with pytest.raises(OpenAIError, match="larger than 20 bytes|at most 20") as too_big:
        _load(DATA_URL, limits=Limits(max_image_bytes=20))
    assert too_big.value.status == 413
    with pytest.raises(OpenAIError, match="4000x4000 pixels") as too_many:
        check_image(_png(4000, 4000), param="p", max_pixels=1000)
    assert too_many.value.status == 413


def test_http_image_is_fetched_only_under_an_allowed_prefix(image_server: str) -> None:
    allow = (image_server + "/public/",)
    assert _load(image_server + "/public/a.png", allow) == PNG
    refused = [
        image_server + "/private/a.png",  # outside the prefix
        image_server + "/publicity/a.png",  # a prefix of the name is not the folder
        image_server + "/public/../private/a.png",  # dot segments
        image_server + "/public/%2e%2e/private/a.png",
        image_server.replace("127.0.0.1", "localhost") + "/public/a.png",  # another host name
        "http://user:pw@" + image_server.removeprefix("http://") + "/public/a.png",
    ]
    for url in refused:
        with pytest.raises(OpenAIError, match="allow-list"):
            _load(url, allow)
    with pytest.raises(OpenAIError, match="HTTP 302"):  # no redirect is followed
        _load(image_server + "/moved", (image_server + "/",))
    with pytest.raises(OpenAIError, match="not an image"):
        _load(image_server + "/public/a.txt", allow)
    with pytest.raises(OpenAIError, match="larger than 10 bytes"):
        _load(image_server + "/public/a.png", allow, Limits(max_image_bytes=10))


def test_allow_list_entries_must_be_http_prefixes() -> None:
    for entry in ("ftp://x/", "example.com", "https://x/?q=1"):
        with pytest.raises(ConfigError, match="not an http"):
            UrlAllowList((entry,))
    assert not UrlAllowList().allows("https://example.com/a.png")  # empty: nothing
