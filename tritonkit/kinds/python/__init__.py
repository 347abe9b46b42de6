"""The Python kind: a ``model.py`` on Triton's Python backend, with its packed environment.

:mod:`.kind` holds the kind (:data:`PYTHON`), :mod:`.autocomplete` what the model's own
``auto_complete_config`` adds to its config before Triton checks it. Its model.py's imports are
judged against the serving image by the validator (:mod:`tritonkit.repository.validator.imports`),
which knows the images' packages.
"""
