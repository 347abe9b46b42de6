"""BLS calls checked against the repository: the models, versions and outputs they name.

Triton loads a Python model without looking at the models its ``pb_utils.InferenceRequest``
calls name (measured on tritonserver 2.51, tests/integration/test_bls_validation_triton.py and
the QA models of tests/fixtures/upstream): the callee is looked up when a request runs the call,
so a name that is not in the repository fails that request, not the load (the model may be
loaded by then with explicit model control, served from another repository, or the call may be
a negative test). What :mod:`tritonkit.repository.bls` resolves statically is checked here:

- ``bls-in-initialize`` (error): a call executed in ``initialize`` (directly or through what it
  calls): the Python stub refuses it ("BLS is only supported during the 'execute' function.")
  and Triton fails the load;
- ``bls-in-finalize`` (warning): the same in ``finalize``: the call never runs;
- ``bls-model-unknown`` (warning): the named model is not in the repository and not declared
  external (spec key ``bls_external``, recorded in the build manifest, or
  ``tritonkit validate --bls-external NAME``): the call fails at request time unless the model
  is there then;
- ``bls-version-unknown`` (warning): a literal ``model_version`` the callee does not load;
- ``bls-output-unknown`` (warning): a literal requested output name the callee does not declare;
- ``bls-model-dynamic`` (info): a name computed at run time, so not checked.

``tritonkit validate --strict`` turns the warnings into errors for teams that want a BLS typo to
fail CI.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path

from tritonkit.repository.bls import BlsCall, model_bls_calls
from tritonkit.repository.validator.ensemble_rules import ModelDirectory
from tritonkit.repository.validator.layout import selected_versions
from tritonkit.repository.validator.report import ConfigFile, Problem, Severity

__all__ = ["check_bls_calls"]


def check_bls_calls(
    models: Mapping[str, ModelDirectory],
    *,
    root: Path,
    display_root: str,
    external: Mapping[str, Collection[str]],
) -> None:
    """Report the BLS calls of every Python model of ``models``.

    ``external``: calling model -> the names it may call that live outside the repository
    (the key ``"*"`` applies to every model).
    """
    for name, info in models.items():
        cf = info.cf
        if cf is None or cf.config.backend != "python":
            continue
        allowed = set(external.get(name, ())) | set(external.get("*", ()))
        seen: set[tuple[str, int, str | None]] = set()
        for version in selected_versions(cf.config, info.versions):
            for call in model_bls_calls(cf.config, root / name / str(version)):
                rel = call.file.relative_to(root).as_posix()
                key = (rel, call.line, call.model)
                if key in seen:  # one finding per call, not per version holding the same file
                    continue
                seen.add(key)
                _check_call(cf, call, f"{display_root}/{rel}", models, allowed)


def _check_call(
    cf: ConfigFile, call: BlsCall, display: str, models: Mapping[str, ModelDirectory], allowed: set[str]
) -> None:
    def report(severity: Severity, code: str, message: str) -> None:
        cf.add(
            Problem(
                severity=severity,
                model=cf.model,
                file=display,
                line=call.line,
                code=code,
                message=message,
            )
        )

    if call.hook == "initialize":
        report(
            "error",
            "bls-in-initialize",
            f"BLS call to {_callee(call)} runs in initialize(): the Python backend refuses it (\"BLS is "
            "only supported during the 'execute' function.\") and Triton fails to load "
            f"'{cf.model}'. Make the call from execute()",
        )
        return
    if call.hook == "finalize":
        report(
            "warning",
            "bls-in-finalize",
            f"BLS call to {_callee(call)} runs in finalize(): the Python backend refuses it (\"BLS is "
            "only supported during the 'execute' function.\"), so it never runs when the model "
            "unloads. Make the call from execute()",
        )
        return
    if call.model is None and call.source.startswith("unset parameter "):
        key = call.source.rsplit(" ", 1)[1]
        report(
            "info",
            "bls-model-dynamic",
            f"BLS call names its model from config parameter {key}, which this model's config does "
            "not set, so it names no model here (fine when the code skips the call without it; "
            f'set parameters {{ key: "{key}" ... }} to have the callee checked)',
        )
        return
    if call.model is None:
        report(
            "info",
            "bls-model-dynamic",
            f"BLS call names its model at run time ({call.expression}); tritonkit cannot tell which "
            "model it calls, so the name is not checked (a literal name, a module constant or a config "
            "parameter would be)",
        )
        return
    where = _where(call, cf)
    callee = models.get(call.model)
    if callee is None:
        if call.model in allowed:
            return
        known = ", ".join(sorted(models)) or "none"
        message = (
            f"BLS call names model '{call.model}'{where}, which is not in this repository "
            f"(models: {known}); Triton loads '{cf.model}' anyway (it looks the callee up when a "
            f"request runs the call), so the call fails at request time unless '{call.model}' is "
            "loaded by then. Fix the name, or, if the model is served from another repository or "
            f"loaded later, declare it: `bls_external: [{call.model}]` on model '{cf.model}' in the "
            f"pipeline spec (or `tritonkit validate --bls-external {call.model}`)"
        )
        report("warning", "bls-model-unknown", message)
        return
    ccf = callee.cf
    if ccf is None:
        return  # the callee's own errors say why it has no usable config
    if call.version is not None:
        loaded = selected_versions(ccf.config, callee.versions)
        if call.version not in loaded:
            report(
                "warning",
                "bls-version-unknown",
                f"BLS call asks for version {call.version} of '{call.model}'{where}, which Triton does "
                f"not load (loaded under its version policy: {', '.join(map(str, loaded)) or 'none'}); "
                "the call fails at request time. Use one of those versions or -1 (the server's choice)",
            )
    if call.outputs is not None and ccf.config.output and not _auto_completes(ccf):
        declared = {t.name for t in ccf.config.output}
        for output in call.outputs:
            if output not in declared:
                report(
                    "warning",
                    "bls-output-unknown",
                    f"BLS call requests output '{output}' of '{call.model}'{where}, which its config "
                    f"does not declare (outputs: {', '.join(sorted(declared))}); the call fails at "
                    "request time",
                )


def _callee(call: BlsCall) -> str:
    return f"'{call.model}'" if call.model is not None else f"a model named at run time ({call.expression})"


def _where(call: BlsCall, cf: ConfigFile) -> str:
    if call.source.startswith("parameter "):
        key = call.source.split(" ", 1)[1]
        line = cf.line(f"parameters[{key}]")
        at = f"{cf.display}:{line}" if line is not None else cf.display
        return f" (from parameter {key} of {at})"
    if call.source.startswith("constant "):
        return f" (through {call.source})"
    return ""


def _auto_completes(cf: ConfigFile) -> bool:
    """A Python callee whose model defines auto_complete_config may add outputs at load time."""
    if cf.config.backend != "python":
        return False
    model_dir = cf.path.parent if cf.path.parent.name != "configs" else cf.path.parent.parent
    filename = cf.config.default_model_filename or "model.py"
    for source in model_dir.glob(f"*/{filename}"):
        try:
            if b"auto_complete_config" in source.read_bytes():
                return True
        except OSError:
            continue
    return False
