"""Analytic costs and memory from a model and a chip description: real-unit timelines and GiB per rank.

Modules, one concern each: ``model_spec``/``model_presets`` (what is trained), ``chip_spec``/``chip_presets``
(what it runs on), ``layout`` (how it is split: tp, dp, pp, recompute, sequence parallel), ``params``
(parameter counts), ``flops`` (FLOPs per layer), ``activations`` (bytes stored per layer), ``comm``
(collective and P2P times), ``to_costs`` (a :class:`pipesim.sim.costs.CostModel` in seconds), ``memory_gib``
(GiB per rank from the simulated schedule), ``step_report`` (what the CLI prints).

Modules added for fidelity to real runs: ``stage_split`` (uneven layer splits), ``kernels`` (per-operation
times from shapes), ``steady_state`` (steps back to back), ``spec_fields`` (the model/chip file schema),
``collective_shares`` (the share of the intra-node link each collective reaches by group size, from measured
tables), ``attention_shapes`` (a fused attention kernel's rate at a layer's sequence and head size, from measured
tables, and the cost of a grid of query tiles too small to fill the chip), ``interpolate`` (reading such a
table between its points).

Assumptions that move the result, in order of how much (each is detailed where it is implemented):

1. Kernel efficiencies, one per chip and kernel class (``chip_presets``): large GEMMs at 0.80 of peak (FP8
   0.60), fused attention 0.55 forward / 0.45 backward (A100 0.71/0.57 and Hopper 0.35/0.28 at 16k tokens and
   head size 128, scaled to each layer's shape by FlashAttention-2's measured A100 and H100 rates:
   ``attention_shapes``),
   streaming kernels 0.90 of HBM bandwidth.
   ``--achievable-fraction`` replaces them with one fraction for all work.
2. TP collectives exposed unless ``--async-tp``; pipeline sends block their sender unless overlapped
   (``--overlap-p2p``, or the framework's way for the schedule: Megatron-LM's interleaved one);
   DP sync not overlapped (``comm``); TP on the intra-node link when ``tp ≤ node_size`` (at its measured share
   of that link where the chip has a table: ``collective_shares``); a P2P boundary or a DP group that leaves a
   node on the inter-node NIC.
3. FLOPs for MFU count the full s² attention (no causal halving); fused attention *time* skips the causal half.
4. Gradients are FP32 (4 B/param) both in memory and on the wire; 18 B/param in total (``layout``).
5. Activation bytes per Korthikanti et al. 2023 Table 2, generalized to GQA/SwiGLU/no-dropout; FlashAttention
   (no s² scores) by default; no allocator fragmentation, CUDA context or communication buffers
   (``activations``, ``memory_gib``).
6. Layers split evenly over ``pp·v`` stages unless a split is given (``stage_split``); the embedding and the
   LM head add to the first and last stage.
"""
