"""Published runs, one module per source. Each module defines ``SOURCE`` (the citation every row carries,
or several) and ``ROWS``; :data:`PUBLISHED_RUNS` is all of them in this order.

A source is the unit of leave-one-out validation (:mod:`pipesim.validation.loso`): one paper or one
benchmark report, measured on one system by one team, so its rows share whatever that system did that the
model does not know.
"""

from __future__ import annotations

from importlib import import_module

from pipesim.validation.runs import PublishedRun

IN_SAMPLE_MODULES: tuple[str, ...] = ("narayanan2021", "korthikanti2023", "llama3_2024", "nemo2407", "qi2024")
"""The sources the chip constants were chosen while looking at: their mean error is in-sample."""
OUT_OF_SAMPLE_MODULES: tuple[str, ...] = ("mosaicml2023", "torchtitan2024", "fmsfsdp2024")
"""Sources added after the constants were fixed (issue #24), not fitted to when added. Two constants fitted since
read them too (the Hopper training GEMM ratio, ZeRO-3's overlap share: :mod:`pipesim.validation.constants`);
validation by source left out refits those without each source, so the left-out error stays held out."""
GATHERED_MODULES: tuple[str, ...] = ("nemotron4_15b_2024", "nemotron4_340b_2024", "dao2023", "narayanan2021_zero3",
                                      "mosaicml_small2023", "glm130b_2022", "neox20b_2022", "nemo_megatron2022",
                                      "flagperf2024", "mlperf_v31_gpt3", "mlperf_v30_gpt3",
                                      "mlperf_v4_gpt3", "mlperf_v50_llama405b", "mlperf_v51_llama8b",
                                      "mlperf_v51_h200", "olmo_core2024", "hagemann2023",
                                      "smol2025", "opt175b_2022", "internevo2023", "megatron_llama2023",
                                      "pytorch_fsdp_blog2024", "fp8lm2023", "yeung2024")
"""Held-out sources gathered for issue #24 (item 2) after every constant was fixed, not fitted to when added (the
same two later constants read them, validated the same way): Nemotron-4
15B's and 340B's batch-ramp tables (H100 BF16, Megatron/NeMo), FlashAttention-2's end-to-end table (8×A100,
fused and unfused attention) and Narayanan et al.'s Table 2 (ZeRO-3 against PTD-P on A100; the paper of the
in-sample ``narayanan2021``, so not independent of it: see its module) and, gathered later, the MosaicML tables'
rows that ``mosaicml2023`` had left out (MPT 125M-3B on 8-128 GPUs, and the H100 table at 128-512 GPUs: same
platform as ``mosaicml2023``), and two runs on DeepSpeed's pipeline engine with full recomputation: GLM-130B's
pre-training (768 A100 40GB) and GPT-NeoX-20B's (96 A100 40GB); and, gathered a release later, NeMo Megatron's
2022 scaling tables (GPT-3 5B and 175B on 8–1,024 A100 80GB, NeMo-Framework-Launcher's README); and, a release
after, BAAI's FlagPerf LLM cases (Llama 3 8B and 70B with Megatron-Core on A800 and H100, a layout ablation on one
A800 node among them; Llama 2 70B with FlagScale on H800; Llama 2 7B with DeepSpeed ZeRO-3 on A800 and H800);
and, a release after that, MLPerf Training's logs: v3.1's and v3.0's GPT-3 175B (NeMo in FP8 on 512–10,752 H100
of NVIDIA's Eos, Azure's ND H100 v5 and CoreWeave's HGX H100: one layout at many scales, two software releases),
v4.0's and v4.1's (NeMo 24.04 and 24.09 on Eos and Oracle's OCI H100, a block-average step; and, gathered
later, Sustainable Metal Cloud's v4.0 run of NVIDIA's code on its own 512 H100, a per-step one), v5.0's Llama 3.1 405B
(NeMo 25.01 in FP8, tp 8 × pp 8 × cp 2 interleaved on 512–8,192 H100, tp 4 on 512 and 1,024 H200) and v5.1's
Llama 3.1 8B on Cisco's H100 (64 and 128 GPUs, one microbatch per step); and, gathered later, v5.1's Llama 3.1 8B
on HPE's 64 H200 (cp 2, the layout of the DGX B200 rows of ``mlperf_v51_b200``); and, gathered later still,
AllenAI OLMo-core's README throughput table (OLMo 1B, 7B and 13B and a Llama 3 8B shape with FSDP2 and
torch.compile on 8 H100, BF16 and torchao Float8); and, the release after, Hagemann et al. 2023's layout ablation
(248 trials of LLaMA-shaped 13B, 30B and 65B on 32–256 A100 80GB, Aleph Alpha's framework: every tp × pp ×
micro-batch × recomputation × sequence-parallel trial that ran with FlashAttention-2, and with FlashAttention v1 since
it was modelled: 104 more); and, gathered later,
Hugging Face's Smol Training Playbook (SmolLM3-3B on 384 H100 and its 1B ablation baseline on 8, nanotron); and,
the release after, OPT-175B's pre-training (992 A100 80GB, fairscale's FSDP with Megatron's tensor parallelism and
full recomputation, metaseq); and, the release after, InternEvo's InternLM-7B tables (8–1,024 A100 80GB on four
100 Gb/s RoCE NICs a node, with and without checkpointing, one to four microbatches a step); and, with FlashAttention
v1 modelled, Alibaba's Megatron-LLaMA README (LLaMA-13B on 32-512 A100 80GB, Megatron-LM's distributed optimizer
against its overlapped one); and, the release after, the PyTorch blog's FSDP table (Llama 2 7B-70B with IBM's fms-fsdp
on 128 A100 at 400 Gb/s a node and 96 H100 at 800 Gb/s a node, HSDP and FSDP); and, the release after, FP8-LM's
system-performance table (Microsoft's GPT-7B, 13B and 175B with Megatron-LM on 32–128 H100, BF16 and Transformer
Engine FP8) and the artifact of Yeung et al.'s vocabulary-parallelism paper (a 4B GPT at pp 8 on 8 A100 with
vocabularies of 32k to 256k, the output layer on the last stage as Megatron-LM places it and moved layers off it;
Qi et al.'s lab and platform). Each module states what it
infers."""
BLACKWELL_MODULES: tuple[str, ...] = ("mlperf_v41_b200_gpt3", "mlperf_v50_gb200", "mlperf_v51_b200",
                                      "mlperf_v51_nvfp4", "mlperf_v51_blackwell_ultra")
"""Published runs on Blackwell chips (DGX B200, GB200 NVL72; Blackwell Ultra's HGX B300 and GB300 NVL72, gathered
after their presets were written from datasheets), in FP8 and, in MLPerf v5.1's NVFP4 runs, FP4 (gathered
after NVFP4 was modelled from a kernel measurement alone): in the step-time table
(:data:`SOURCE_MODULES`), where they inform one fitted constant, the Blackwell sustained clock
(:mod:`pipesim.validation.constants`), and give the Blackwell kind its error band. Gathered for issue #24 after
every other constant was fixed. ``experiments/published_runs.py --blackwell`` reports them alone."""
SOURCE_MODULES: tuple[str, ...] = IN_SAMPLE_MODULES + OUT_OF_SAMPLE_MODULES + GATHERED_MODULES + BLACKWELL_MODULES
MEMORY_MODULES: tuple[str, ...] = ("megatron_memtool2023",)
"""Sources that publish memory and no speed (issue #24): not in :data:`SOURCE_MODULES`, whose rows are the
step-time table and the unit of validation by source left out (no fitted constant moves memory, so a memory
row's error is the same in sample and left out). Their rows join the memory figures: :data:`MEMORY_RUNS`."""
MOE_MODULES: tuple[str, ...] = ("deepseek_v3_2024", "megatron_moe2024")
"""Published mixture-of-experts runs (issue #25), held out of everything: not in :data:`SOURCE_MODULES`, so
validation by source left out never fits a constant on them nor folds them into the error bands; no constant
was chosen looking at them. ``experiments/published_runs.py --moe`` reports them."""


def rows_of(*modules: str) -> list[PublishedRun]:
    """The rows of the named source modules, in that order."""
    rows: list[PublishedRun] = []
    for name in modules:
        rows += import_module(f"{__name__}.{name}").ROWS
    return rows


def module_of(run: PublishedRun) -> str:
    """The source module ``run`` comes from."""
    return _MODULE_OF[id(run)]


PUBLISHED_RUNS: list[PublishedRun] = rows_of(*SOURCE_MODULES)
IN_SAMPLE_RUNS: list[PublishedRun] = rows_of(*IN_SAMPLE_MODULES)  # the same objects as in PUBLISHED_RUNS
MOE_RUNS: list[PublishedRun] = rows_of(*MOE_MODULES)
BLACKWELL_RUNS: list[PublishedRun] = rows_of(*BLACKWELL_MODULES)
MEMORY_ONLY_RUNS: list[PublishedRun] = rows_of(*MEMORY_MODULES)  # the memory-only sources' rows
MEMORY_RUNS: list[PublishedRun] = [r for r in PUBLISHED_RUNS if r.memory_gib is not None] + MEMORY_ONLY_RUNS
"""Every dense row that publishes a peak memory: the step-time sources' and the memory-only ones'."""
_MODULE_OF: dict[int, str] = {id(r): name
                              for name in SOURCE_MODULES + MEMORY_MODULES + MOE_MODULES
                              for r in import_module(f"{__name__}.{name}").ROWS}


PLATFORM_OF: dict[str, str] = {"mosaicml_small2023": "mosaicml2023", "pytorch_fsdp_blog2024": "fmsfsdp2024",
                               "yeung2024": "qi2024"}
"""Modules whose rows were measured on another module's platform with the same software and scripts: validation
leaves them out together with it and weighs them as one source (their errors are not independent)."""


PUBLISHED: dict[str, str] = {
    # papers: the month of the version whose table is read (arXiv's first, or the report's)
    "narayanan2021": "2021-04", "narayanan2021_zero3": "2021-04", "neox20b_2022": "2022-04",
    "korthikanti2023": "2022-05", "opt175b_2022": "2022-05", "glm130b_2022": "2022-10", "dao2023": "2023-07",
    "fp8lm2023": "2023-10", "hagemann2023": "2023-11", "qi2024": "2024-01", "nemotron4_15b_2024": "2024-02",
    "nemotron4_340b_2024": "2024-06", "llama3_2024": "2024-07", "yeung2024": "2024-11", "smol2025": "2025-10",
    # repositories' and blogs' tables: the month of the commit or post that made the rows read all public
    "nemo_megatron2022": "2022-09", "internevo2023": "2023-07", "megatron_llama2023": "2023-08",
    "mosaicml2023": "2023-10", "mosaicml_small2023": "2024-01", "fmsfsdp2024": "2024-03",
    "pytorch_fsdp_blog2024": "2024-05", "flagperf2024": "2024-05", "nemo2407": "2024-08",
    "torchtitan2024": "2024-12", "olmo_core2024": "2025-03",
    # MLPerf Training rounds: the month each round's results were published
    "mlperf_v30_gpt3": "2023-06", "mlperf_v31_gpt3": "2023-11", "mlperf_v4_gpt3": "2024-11",
    "mlperf_v41_b200_gpt3": "2024-11", "mlperf_v50_llama405b": "2025-06", "mlperf_v50_gb200": "2025-06",
    "mlperf_v51_llama8b": "2025-11", "mlperf_v51_h200": "2025-11", "mlperf_v51_b200": "2025-11",
    "mlperf_v51_nvfp4": "2025-11", "mlperf_v51_blackwell_ultra": "2025-11",
}
"""The month ("YYYY-MM") by which each step-time module's rows, as read, were all public: what a prediction made
before then could have been fitted on (:mod:`pipesim.validation.forward`). A module read from several releases
takes the latest it reads (MLPerf v4.0 and v4.1: November 2024; MosaicML's H100 table, regenerated October 2023;
OLMo-core's table as of March 2025); a month, since a table's day is rarely stated."""


def published_month(run: PublishedRun) -> str:
    """The month ``run``'s source published it (:data:`PUBLISHED`)."""
    return PUBLISHED[module_of(run)]


def platform_of(module: str) -> str:
    """The unit of validation a source module belongs to: itself, or the module it shares a platform with."""
    return PLATFORM_OF.get(module, module)


def runs_by_source() -> dict[str, list[PublishedRun]]:
    """Rows grouped by source (the unit left out in validation: a module, with the modules that share its
    platform, :data:`PLATFORM_OF`), in :data:`SOURCE_MODULES` order."""
    groups: dict[str, list[PublishedRun]] = {}
    for name in SOURCE_MODULES:
        groups.setdefault(platform_of(name), []).extend(import_module(f"{__name__}.{name}").ROWS)
    return groups


def source_title(name: str) -> str:
    """A source module's short citation, e.g. ``Qi et al. 2024``."""
    return import_module(f"{__name__}.{name}").SOURCE.split(",")[0]
