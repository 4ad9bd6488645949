"""Analytic costs and memory from a model and a chip description: real-unit timelines and GiB per rank.

Modules, one concern each: ``model_spec``/``model_presets`` (what is trained), ``chip_spec``/``chip_presets``
(what it runs on), ``layout`` (how it is split: tp, dp, pp, recompute, sequence parallel), ``params``
(parameter counts), ``flops`` (FLOPs per layer), ``activations`` (bytes stored per layer), ``comm``
(collective and P2P times), ``to_costs`` (a :class:`pipesim.sim.costs.CostModel` in seconds), ``memory_gib``
(GiB per rank from the simulated schedule), ``step_report`` (what the CLI prints) and ``cli_hooks``.

Assumptions that move the result, in order of how much (each is detailed where it is implemented):

1. ``ChipSpec.achievable_fraction`` = 0.6 of peak BF16 FLOP/s for every layer, standing for GEMM efficiency
   and all element-wise kernels (``chip_spec``). Step time scales with its inverse.
2. No overlap of TP collectives, DP gradient sync or P2P with compute (``comm``); TP on the intra-node
   link when ``tp ≤ node_size``; DP/P2P on the inter-node NIC (one per chip) once their group leaves a node.
3. FLOPs count the full s² attention (no causal halving) and no element-wise work (``flops``).
4. Gradients are FP32 (4 B/param) both in memory and on the wire; 18 B/param in total (``layout``).
5. Activation bytes per Korthikanti et al. 2023 Table 2, generalized to GQA/SwiGLU/no-dropout; FlashAttention
   (no s² scores) by default; no allocator fragmentation, CUDA context or communication buffers
   (``activations``, ``memory_gib``).
6. Layers split evenly over ``pp·v`` stages; the embedding and the LM head add to the first and last stage.
"""
