"""Analytic costs and memory from a model and a chip description: real-unit timelines and GiB per rank.

Modules, one concern each: ``model_spec``/``model_presets`` (what is trained), ``chip_spec``/``chip_presets``
(what it runs on), ``layout`` (how it is split: tp, dp, pp, recompute, sequence parallel), ``params``
(parameter counts), ``flops`` (FLOPs per layer), ``activations`` (bytes stored per layer), ``comm``
(collective and P2P times), ``to_costs`` (a :class:`pipesim.costs.CostModel` in seconds), ``memory_gib``
(GiB per rank from the simulated schedule), ``step_report`` (what the CLI prints) and ``cli_hooks``.
"""
