"""The tune strategies, one per module: ``surrogate`` (the default, optuna's TPE), ``coordinate``
(hill-climb), ``grid``; ``base`` holds the state they share and ``finalists`` how each ends.
:func:`tritonkit.tune.strategy.search` picks one."""
