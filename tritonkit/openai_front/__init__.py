"""An OpenAI-compatible API in front of any Triton: vLLM stages and mapped pipelines (images
included), reached through tritonkit's own client.

``tritonkit openai TRITON_URL --port P`` or ``tritonkit serve REPO --openai-port P``; in code,
``create_app(FrontSettings(triton_url=...))`` is an ASGI app and :class:`FrontServer` runs it on a
thread. :func:`openai_parameters` turns a spec's ``openai:`` mapping into the config parameters
the front reads. See docs/openai.md.
"""

from tritonkit.openai_front.app import FrontSettings, create_app
from tritonkit.openai_front.auth import ApiKeys
from tritonkit.openai_front.errors import OpenAIError
from tritonkit.openai_front.images import UrlAllowList
from tritonkit.openai_front.limits import Limits
from tritonkit.openai_front.mapping import PipelineMapping, openai_parameters
from tritonkit.openai_front.server import FrontServer, serve
from tritonkit.openai_front.templates import ChatTemplate

__all__ = [
    "ApiKeys",
    "ChatTemplate",
    "FrontServer",
    "FrontSettings",
    "Limits",
    "OpenAIError",
    "PipelineMapping",
    "UrlAllowList",
    "create_app",
    "openai_parameters",
    "serve",
]
