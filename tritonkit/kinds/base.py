"""The protocol every backend kind follows, and the plain facts a kind states.

A backend kind is what follows from "this model runs on backend X": which spec keys it takes,
what a build writes for it, what the validator checks, which models of a repository are its
own, which releases carry it, and what serving and deploying it need. The spec, the builder,
the validator and the server ask :mod:`tritonkit.kinds.registry` for the kind and then ask it;
a new backend is one new module here and one line in the registry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from tritonkit.kinds.entry import ModelEntry, ModelKind
from tritonkit.kinds.walk import models_of

if TYPE_CHECKING:
    from tritonkit.config import ModelConfig
    from tritonkit.kinds.rules import ConfigFile, FileContext, RepositoryContext

__all__ = [
    "AutoComplete",
    "BackendKind",
    "BaseKind",
    "BuildFacts",
    "DeployFacts",
    "FileCheck",
    "RepositoryCheck",
    "ServeFacts",
    "SpecContext",
]

#: a check of one parsed config (config.pbtxt or a configs/*.pbtxt variant) and its model's files
FileCheck = Callable[["ConfigFile", "FileContext"], None]
#: a check across the models of a repository
RepositoryCheck = Callable[["RepositoryContext"], None]
#: what the backend's auto-complete fills into one parsed config before Triton checks it (run
#: unless the server has --disable-auto-complete-config); reports what makes it fail the load
AutoComplete = Callable[["ConfigFile", "FileContext"], None]


@dataclass(frozen=True, kw_only=True)
class SpecContext:
    """What parsing one spec model needs besides its own keys."""

    base: Path  # the spec's directory: relative paths resolve against it
    spec: Path  # the spec file, for messages and line numbers
    target: str | None = None  # the spec-level ``target`` release
    serving_root: str | None = None  # the build's --serving-root (None: the kind's default)


@dataclass(frozen=True, kw_only=True)
class BuildFacts:
    """What a build writes for a model of this kind, as data."""

    default_filename: str | None = None  # the model file in the version dir (None: model<suffix>)
    records_target: bool = False  # the manifest records the model's own ``target`` release
    records_serving_root: bool = False  # its files name the serving root: the manifest records it


@dataclass(frozen=True, kw_only=True)
class ServeFacts:
    """Where a model of this kind can be served."""

    local: bool = True  # the pip-installed tritonserver of ``tritonkit serve`` loads it
    needs_gpu: bool = False  # it runs only on an NVIDIA GPU
    image: str | None = None  # NVIDIA's image for a release, "{release}" to fill (None: the py3 image)
    image_marker: str | None = None  # a text every image that has this backend names
    default_release: str | None = None  # the release to suggest when none is recorded

    def image_for(self, release: str) -> str | None:
        """NVIDIA's image with this backend for ``release`` (None: the py3 image serves it)."""
        return self.image.format(release=release) if self.image else None


@dataclass(frozen=True, kw_only=True)
class DeployFacts:
    """What deploying a model of this kind needs."""

    serving_root: bool = False  # its files name the repository's path on the serving node
    # the backend picks its device itself whatever the instance kind (KIND_MODEL): a GPU where
    # the image has one, so deploy sizes such a model as a GPU one
    picks_own_device: bool = False
    # said after "model X is decoupled: ..." when Azure ML refuses it: why its image cannot serve
    # the kind and where to deploy it instead ("" : nothing to add)
    aml_decoupled_note: str = ""
    # a warning for Azure ML's no-code Triton about this kind's models ({models}: their names;
    # "" : none)
    aml_warning: str = ""


class BackendKind(Protocol):
    """One backend kind (see the module docstring)."""

    @property
    def name(self) -> str: ...
    @property
    def model_kind(self) -> ModelKind: ...
    @property
    def backends(self) -> frozenset[str]: ...
    @property
    def platforms(self) -> frozenset[str]: ...
    @property
    def source_suffixes(self) -> frozenset[str]: ...
    @property
    def spec_keys(self) -> frozenset[str]: ...
    @property
    def title(self) -> str: ...
    @property
    def build(self) -> BuildFacts: ...
    @property
    def serve(self) -> ServeFacts: ...
    @property
    def deploy(self) -> DeployFacts: ...
    @property
    def releases(self) -> Mapping[str, Any]: ...
    @property
    def file_checks(self) -> tuple[FileCheck, ...]: ...
    @property
    def repository_checks(self) -> tuple[RepositoryCheck, ...]: ...
    @property
    def auto_complete(self) -> AutoComplete | None: ...

    def answers_for(self, *, backend: str, platform: str) -> bool:
        """Whether a config with this ``backend`` / ``platform`` is this kind's."""
        ...

    def describes(self, raw: Mapping[str, Any]) -> bool:
        """Whether the spec model ``raw`` is this kind's own form (parsed or expanded by it)."""
        ...

    def expand(self, raw: Mapping[str, Any], *, context: SpecContext) -> list[Mapping[str, Any]]:
        """The spec models ``raw`` stands for (one kind of model may be several, e.g. TensorRT-LLM)."""
        ...

    def parse(
        self, raw: Mapping[str, Any], *, name: str, where: str, context: SpecContext
    ) -> ModelEntry | None:
        """The entry of a spec model this kind parses itself; None: the spec's common parse."""
        ...

    def write_version(self, entry: ModelEntry, version_dir: Path, *, serving_root: str) -> list[str] | None:
        """Write the version directory's files itself (notes for the user); None: the build copies
        the model's source."""
        ...

    def config(self, entry: ModelEntry, fields: Mapping[str, Any]) -> ModelConfig | None:
        """The config.pbtxt this kind writes itself; None: the common one from the spec's fields."""
        ...

    def models_in(self, repository: Path, *, variants: bool = False) -> list[str]:
        """The models of ``repository`` of this kind (by their configs' backend or platform)."""
        ...


@dataclass(frozen=True, kw_only=True)
class BaseKind:
    """A kind with the common answers: parsed, built and checked the spec's common way."""

    model_kind: ModelKind
    #: the kind's name (the registry's key, the messages'); by default its model kind's value
    name: str = ""
    title: str
    backends: frozenset[str] = frozenset()
    platforms: frozenset[str] = frozenset()
    source_suffixes: frozenset[str] = frozenset()
    spec_keys: frozenset[str] = frozenset()
    build: BuildFacts = BuildFacts()
    serve: ServeFacts = ServeFacts()
    deploy: DeployFacts = DeployFacts()
    releases: Mapping[str, Any] = field(default_factory=dict)
    file_checks: tuple[FileCheck, ...] = ()
    repository_checks: tuple[RepositoryCheck, ...] = ()
    auto_complete: AutoComplete | None = None

    def __post_init__(self) -> None:
        if not self.name:  # a kind that is its own model kind goes by that kind's name
            object.__setattr__(self, "name", self.model_kind.value)

    def answers_for(self, *, backend: str, platform: str) -> bool:
        return (bool(backend) and backend in self.backends) or (bool(platform) and platform in self.platforms)

    def describes(self, raw: Mapping[str, Any]) -> bool:
        return False

    def expand(self, raw: Mapping[str, Any], *, context: SpecContext) -> list[Mapping[str, Any]]:
        return [raw]

    def parse(
        self, raw: Mapping[str, Any], *, name: str, where: str, context: SpecContext
    ) -> ModelEntry | None:
        return None

    def write_version(self, entry: ModelEntry, version_dir: Path, *, serving_root: str) -> list[str] | None:
        return None

    def config(self, entry: ModelEntry, fields: Mapping[str, Any]) -> ModelConfig | None:
        return None

    def models_in(self, repository: Path, *, variants: bool = False) -> list[str]:
        if not (self.backends or self.platforms):
            return []
        return models_of(repository, self.backends, platforms=self.platforms, variants=variants)
