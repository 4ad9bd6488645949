"""Zero Bubble's published numbers (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024): the profiled
costs of Table 9 (Appendix D; milliseconds per pass of one stage) and the bubble rates of Table 5 that the
automatic schedules ZB-1p (limit p·M_B) and ZB-2p (limit 2p·M_B) reach with them.

M_W / M_B per model follows the paper's Table 1 per transformer layer: ``M_B = sb(34h + 5as)`` and
``M_W = 32sbh`` (models of Table 3: h, a, s = 1024).
"""

from __future__ import annotations

from dataclasses import dataclass

from pipesim.program.ir import PipelineShape
from pipesim.sim.costs import CostModel, StageCosts
from pipesim.synth.problem import SynthesisProblem

_MODELS = {  # name: (hidden size h, attention heads a) from Table 3; sequence length 1024 for all
    "1.5B": (2304, 24), "6.2B": (4096, 32), "14.6B": (5120, 40), "28.3B": (6144, 48),
}
SEQUENCE = 1024


@dataclass(frozen=True)
class PaperRow:
    model: str
    pp: int
    microbatches: int
    forward: float
    backward_input: float
    backward_weight: float
    comm: float
    zb_1p: float  # published bubble rate at limit p·M_B
    zb_2p: float  # published bubble rate at limit 2p·M_B

    @property
    def weight_grad_fraction(self) -> float:
        """M_W / M_B of Table 1."""
        h, a = _MODELS[self.model]
        return 32 * h / (34 * h + 5 * a * SEQUENCE)

    def costs(self) -> CostModel:
        stage = StageCosts(
            forward=self.forward, backward=self.backward_input + self.backward_weight,
            backward_input=self.backward_input, backward_weight=self.backward_weight,
            activation=1.0, weight_grad_activation=self.weight_grad_fraction,
        )
        return CostModel(default=stage, p2p_latency=self.comm)  # abstract units: the paper's milliseconds

    def problem(self, limit_factor: int) -> SynthesisProblem:
        """The synthesis problem at limit ``limit_factor``·p·M_B (1: ZB-1p, 2: ZB-2p)."""
        return SynthesisProblem.from_costs(PipelineShape(self.pp, self.microbatches), self.costs(),
                                           float(limit_factor * self.pp))

    def published(self, limit_factor: int) -> float:
        return self.zb_1p if limit_factor == 1 else self.zb_2p


PAPER_ROWS: tuple[PaperRow, ...] = (
    PaperRow("1.5B", 8, 24, 18.522, 18.086, 9.337, 0.601, 0.1585, 0.0433),
    PaperRow("1.5B", 8, 32, 18.513, 18.086, 9.331, 0.626, 0.1242, 0.0039),
    PaperRow("1.5B", 8, 64, 18.546, 18.097, 9.321, 0.762, 0.0674, 0.0026),
    PaperRow("6.2B", 8, 24, 29.718, 29.444, 19.927, 0.527, 0.1323, 0.0029),
    PaperRow("6.2B", 8, 32, 29.802, 29.428, 19.530, 0.577, 0.1045, 0.0022),
    PaperRow("6.2B", 8, 64, 29.935, 29.621, 19.388, 0.535, 0.0554, 0.0010),
    PaperRow("14.6B", 16, 48, 11.347, 11.248, 8.132, 0.377, 0.1397, 0.0066),
    PaperRow("14.6B", 16, 64, 11.307, 11.254, 8.101, 0.379, 0.1088, 0.0054),
    PaperRow("14.6B", 16, 128, 11.325, 11.308, 8.109, 0.378, 0.0576, 0.0028),
    PaperRow("28.3B", 32, 96, 10.419, 10.207, 7.715, 0.408, 0.1421, 0.0038),
    PaperRow("28.3B", 32, 128, 10.408, 10.204, 7.703, 0.408, 0.1106, 0.0029),
    PaperRow("28.3B", 32, 256, 10.402, 10.248, 7.698, 0.460, 0.0594, 0.0018),
)

# Qi et al. 2024, Table 4: model: (pp, micro-batch size, {m: samples/GPU/s of (ZB-2p, ZB-1p, 1F1B, 1F1B-I)},
# peak memory GB of the same four)
QI_TABLE4 = {
    "zb-1.5b": (8, 6, {24: (14.5, 12.9, 11.8, 13.1), 32: (14.8, 13.4, 12.5, 13.4), 64: (14.9, 14.2, 13.6, 13.9)},
                (59, 32, 30, 40)),
    "zb-6.2b": (8, 3, {24: (4.32, 3.88, 3.50, 4.01), 32: (4.35, 4.00, 3.70, 4.08), 64: (4.39, 4.20, 4.03, 4.19)},
                (70, 42, 39, 48)),
    "zb-14.6b": (16, 1, {48: (1.81, 1.61, 1.40, 1.54), 64: (1.83, 1.67, 1.49, 1.59),
                         128: (1.85, 1.76, 1.64, 1.66)}, (51, 33, 32, 39)),
    "zb-28.3b": (32, 1, {96: (0.99, 0.87, 0.76, 0.82), 128: (1.00, 0.90, 0.80, 0.85),
                         256: (1.00, 0.96, 0.88, 0.90)}, (74, 44, 43, 58)),
}
# pipesim's schedule for each column: ZB-1p is zb-h1 (Table 5 gives them the same bubble), ZB-2p is the
# paper's search under 2p·M_B (zb-auto), 1F1B-I is interleaved
QI_TABLE4_SCHEDULES = ("zb-auto", "zb-h1", "1f1b", "interleaved")
