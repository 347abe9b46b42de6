"""An OpenAI-compatible API in front of any Triton: vLLM stages and mapped pipelines (images
included), reached through tritonkit's own client.

``tritonkit openai TRITON_URL --port P`` or ``tritonkit serve REPO --openai-port P``; in code,
``create_app(FrontSettings(triton_url=...))`` is an ASGI app and :class:`FrontServer` runs it on a
thread. :func:`openai_parameters` turns a spec's ``openai:`` mapping into the config parameters
the front reads. See docs/openai.md.
"""

from typing import TYPE_CHECKING

from tritonkit._lazy import lazy_exports

if TYPE_CHECKING:
    from tritonkit.openai_front.app import FrontSettings, create_app
    from tritonkit.openai_front.auth import ApiKeys
    from tritonkit.openai_front.errors import OpenAIError
    from tritonkit.openai_front.images import UrlAllowList
    from tritonkit.openai_front.limits import Limits
    from tritonkit.openai_front.mapping import PipelineMapping, openai_parameters
    from tritonkit.openai_front.server import FrontServer, serve
    from tritonkit.openai_front.templates import ChatTemplate

# The names imported above load on first use: importing one module of the package costs only its
# own floor.
__getattr__, __dir__ = lazy_exports(__name__, __file__)

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
