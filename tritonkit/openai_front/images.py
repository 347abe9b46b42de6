"""``image_url`` parts -> image bytes: ``data:`` URLs decoded, ``http(s)`` only from an allow-list.

Every image is checked before it reaches Triton: its size in bytes, that Pillow reads it as an
image, and its pixels (read from the header, before anything is decoded, so a small file that
would expand to gigapixels is refused cheaply).
"""

from __future__ import annotations

import base64
import binascii
import io
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import unquote_to_bytes, urlsplit

import httpx
from PIL import Image, UnidentifiedImageError

from tritonkit.openai_front.errors import OpenAIError
from tritonkit.openai_front.limits import Limits
from tritonkit.openai_front.requests import ImagePart

__all__ = ["ImageFetcher", "UrlAllowList", "check_image", "decode_data_url"]


def _refuse(message: str, param: str, code: str = "invalid_image", status: int = 400) -> OpenAIError:
    return OpenAIError(message, status=status, param=param, code=code)


def decode_data_url(url: str, *, param: str, max_bytes: int) -> bytes:
    """The bytes of a ``data:[<type>][;base64],<data>`` URL (RFC 2397), at most ``max_bytes``."""
    header, comma, data = url[5:].partition(",")
    if not comma:
        raise _refuse("the data: URL has no ',' before its data", param)
    if not header.split(";", 1)[0].lower().startswith("image/") and header.split(";", 1)[0]:
        raise _refuse(f"the data: URL holds '{header.split(';', 1)[0]}', not an image", param)
    # base64 grows the data by 4/3: refuse before decoding what cannot fit
    if len(data) > (max_bytes * 4) // 3 + 4:
        raise _refuse(f"the image is larger than {max_bytes} bytes", param, "image_too_large", 413)
    if header.lower().endswith(";base64"):
        try:
            raw = base64.b64decode("".join(data.split()), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise _refuse(f"the data: URL's base64 is not valid: {exc}", param) from exc
    else:
        raw = unquote_to_bytes(data)
    if len(raw) > max_bytes:
        raise _refuse(
            f"the image is {len(raw)} bytes; this server takes at most {max_bytes}",
            param,
            "image_too_large",
            413,
        )
    return raw


def check_image(raw: bytes, *, param: str, max_pixels: int) -> None:
    """Refuse bytes that are no image Pillow reads, or an image of more than ``max_pixels``."""
    if not raw:
        raise _refuse("the image is empty", param)
    try:
        with Image.open(io.BytesIO(raw)) as image:
            width, height = image.size
            if width * height > max_pixels:
                raise _refuse(
                    f"the image is {width}x{height} pixels; this server takes at most {max_pixels}",
                    param,
                    "image_too_large",
                    413,
                )
            image.verify()
    except OpenAIError:
        raise
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        raise _refuse(
            f"the bytes are not an image this server can read ({type(exc).__name__})", param
        ) from exc


@dataclass(frozen=True)
class UrlAllowList:
    """URL prefixes (``https://images.example.com/public/``) an ``image_url`` may point under.

    Empty (the default): no http(s) URL is fetched. A prefix matches on scheme, host and port
    exactly and on the path as a prefix, so ``https://a.example/x/`` never admits
    ``https://a.example.evil/`` or ``https://a.example/xy``.
    """

    prefixes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for prefix in self.prefixes:
            parts = urlsplit(prefix)
            if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
                from tritonkit.errors import ConfigError

                raise ConfigError(
                    f"image URL allow-list entry {prefix!r} is not an http(s) URL prefix",
                    hint="give e.g. https://images.example.com/public/",
                )

    def allows(self, url: str) -> bool:
        try:
            target = urlsplit(url)
            port = target.port
        except ValueError:
            return False
        if target.username or target.password:
            return False
        segments = unquote_to_bytes(target.path).split(b"/")
        if b".." in segments or b"." in segments:  # a prefix check on an unresolved path is no check
            return False
        for prefix in self.prefixes:
            allowed = urlsplit(prefix)
            path = allowed.path if allowed.path.endswith("/") or not allowed.path else allowed.path + "/"
            if (
                target.scheme == allowed.scheme
                and target.hostname == allowed.hostname
                and port == allowed.port
                and (
                    target.path == allowed.path or target.path.startswith(path) or not allowed.path.strip("/")
                )
            ):
                return True
        return False


class ImageFetcher:
    """Turns a request's image parts into checked bytes."""

    def __init__(self, *, limits: Limits, allow: UrlAllowList, timeout: float = 10.0) -> None:
        self.limits = limits
        self.allow = allow
        self.timeout = timeout

    async def load(self, parts: Sequence[ImagePart]) -> list[bytes]:
        images = []
        for part in parts:
            raw = await self._bytes(part)
            check_image(raw, param=part.param, max_pixels=self.limits.max_image_pixels)
            images.append(raw)
        return images

    async def _bytes(self, part: ImagePart) -> bytes:
        scheme = part.url.split(":", 1)[0].lower()
        if scheme == "data":
            return decode_data_url(part.url, param=part.param, max_bytes=self.limits.max_image_bytes)
        if scheme not in ("http", "https"):
            raise _refuse("an image_url must be a data: URL or an http(s) URL", part.param)
        if not self.allow.allows(part.url):
            raise _refuse(
                "this server fetches no image from that URL (only from its allow-list; send the image "
                "as a data: URL instead)",
                part.param,
                "image_url_not_allowed",
            )
        return await self._fetch(part)

    async def _fetch(self, part: ImagePart) -> bytes:
        limit = self.limits.max_image_bytes
        try:
            # No redirects: a redirect could leave the allow-list.
            async with httpx.AsyncClient(
                timeout=self.timeout, follow_redirects=False, trust_env=False
            ) as http:
                async with http.stream("GET", part.url) as response:
                    if response.status_code != 200:
                        raise _refuse(
                            f"fetching the image gave HTTP {response.status_code}",
                            part.param,
                            "image_fetch_failed",
                        )
                    chunks: list[bytes] = []
                    size = 0
                    async for chunk in response.aiter_bytes():
                        size += len(chunk)
                        if size > limit:
                            raise _refuse(
                                f"the image is larger than {limit} bytes", part.param, "image_too_large", 413
                            )
                        chunks.append(chunk)
        except httpx.HTTPError as exc:
            raise _refuse(
                f"fetching the image failed: {type(exc).__name__}", part.param, "image_fetch_failed"
            ) from exc
        return b"".join(chunks)
