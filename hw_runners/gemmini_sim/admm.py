"""TinyMPC's ADMM kernels as gemmini-sim families: the three workloads of Autocomp's admm-multifunction set
(ucb-bar/autocomp harnesses/admm-multifunction/test{0,1,2}.c), on Gemmini's FP32DefaultConfig (fp32-4x4).
Shapes, horizons, argument order and the harness's helpers (add_matrix, negate_matrix) are the harnesses';
the references are numpy versions of what each harness computes its gold output with. The quadrotor model
has 12 states and 4 inputs.

  tinympc-u            u = -(Kinf^T x) - d             (test0: Kinf stored transposed, 12x4)
  tinympc-forward-N    for i < N: u[i] = -Kinf x[i] - d[i]; x[i+1] = Adyn x[i] + Bdyn u[i]   (test1, N = 5)
  tinympc-backward-N   for i = N-2 .. 0: d[i] = Quu_inv^T (Bdyn^T p[i+1] + r[i]);
                                           p[i] = q[i] + AmBKt p[i+1] - Kinf^T r[i]      (test2, N = 10)

The output checked is the harness's OUTPUT_MATRIX_NAME (u_i, u, d); x and p are also written by the kernels
(as in TinyMPC) but are state, not output. Results are float32 sums in the hardware's order, compared with
the float64 reference within TOLERANCE."""
from __future__ import annotations

import math

import numpy as np

from autocomp_zmq.hw_runners.gemmini_sim.workloads import FAMILIES, INPUT_SETS, ArgSpec, Family

NX, NU = 12, 4                       # states, inputs (harness shapes)
F32 = np.float32
MAX_HORIZON = 10_000
# float32 results of O(1) values after a few dozen roundings, against float64: loose enough for any
# summation order, tight enough that a wrong sign, element or step is far outside it
TOLERANCE = (1e-4, 1e-4)
_HELPERS = {"add_matrix": "gemmini_sim_add_matrix", "negate_matrix": "gemmini_sim_negate_matrix"}


class _Admm(Family):
    config = "fp32-4x4"
    tolerance = TOLERANCE
    density = 8                      # the harness draws each element as (rand() % density == 0)

    def tile_products(self, d):
        return math.ceil(self.macs(d) / 64)

    def reduction_length(self, d):
        return NX

    def size_limit(self, d):
        n = d.get("NHORIZON")
        if n is not None and not self.min_horizon <= n <= MAX_HORIZON:
            return f"NHORIZON must be {self.min_horizon}..{MAX_HORIZON}"
        return None

    min_horizon = 1

    def prototype(self, d):
        return self.signature(d) + ";"

    def defines(self, d):
        return [f"-D{k}={v}" for k, v in d.items()]

    def harness_macros(self, d, names=None):
        # the harness's helpers, executed and priced by the replayer (csrc/cpuops.c), and its size macros
        return {**_HELPERS, **self.sizes(d)}

    def sizes(self, d) -> dict:
        return {}

    def make_inputs(self, d, seed, kind):
        rng = np.random.default_rng([seed, INPUT_SETS.index(kind), *d.values()])
        out = []
        for a in self.args(d):
            if a.output:
                continue
            if kind == "sparse":        # the harness's own values: 0 or 1, exact sums
                x = (rng.integers(0, self.density, size=a.shape) == 0).astype(F32)
            elif kind == "small-values":  # small integers: exact sums with signs
                x = rng.integers(-1, 2, size=a.shape).astype(F32)
            else:                         # O(1) values; matrices scaled so the horizon's recursion stays O(1)
                scale = 1.0 / math.sqrt(a.shape[-1]) if a.shape[-1] > 1 else 1.0
                x = rng.uniform(-1.0, 1.0, size=a.shape).astype(F32) * F32(scale)
            out.append(x)
        return out


def _f64(*xs):
    return [np.asarray(x, dtype=np.float64) for x in xs]


class TinyMpcU(_Admm):
    key = "tinympc_u"
    dim_names = ()
    pattern, regex = "tinympc-u", r"tinympc-u"

    def name(self, d):
        return "tinympc-u"

    def signature(self, d):
        return "void solution(float Kinf[12][4], float x_i[12][1], float d_i[4][1], float u_i[4][1])"

    def args(self, d):
        return [ArgSpec("Kinf", F32, (NX, NU)), ArgSpec("x_i", F32, (NX, 1)), ArgSpec("d_i", F32, (NU, 1)),
                ArgSpec("u_i", F32, (NU, 1), output=True)]

    def macs(self, d):
        return NX * NU

    def sizes(self, d):
        return {"MAT_DIM_I": NU, "MAT_DIM_K": NX, "MAT_DIM_J": 1, "A_TRANSPOSE": 1, "B_TRANSPOSE": 0, "NO_BIAS": 0}

    def reference(self, d, inputs):
        kinf, x, dd = _f64(*inputs)
        return (-(kinf.T @ x) - dd).astype(F32)


class TinyMpcForward(_Admm):
    key = "tinympc_forward"
    sizes_note = "any horizon N >= 1"
    dim_names = ("NHORIZON",)
    pattern, regex = "tinympc-forward-N", r"tinympc-forward-([0-9]+)"

    def name(self, d):
        return f"tinympc-forward-{d['NHORIZON']}"

    def signature(self, d):
        return ("void solution(float Adyn[12][12], float Bdyn[12][4], float Kinf[4][12], "
                "float x[NHORIZON + 1][12][1], float d[NHORIZON][4][1], float u[NHORIZON][4][1])")

    def args(self, d):
        n = d["NHORIZON"]
        return [ArgSpec("Adyn", F32, (NX, NX)), ArgSpec("Bdyn", F32, (NX, NU)), ArgSpec("Kinf", F32, (NU, NX)),
                ArgSpec("x", F32, (n + 1, NX, 1)), ArgSpec("d", F32, (n, NU, 1)),
                ArgSpec("u", F32, (n, NU, 1), output=True)]

    def macs(self, d):
        return d["NHORIZON"] * (NU * NX + NX * NX + NX * NU)

    def reference(self, d, inputs):
        a, b, k, x0, dd = _f64(*inputs)
        x, u = x0[0], np.zeros((d["NHORIZON"], NU, 1))
        for i in range(d["NHORIZON"]):
            u[i] = -(k @ x) - dd[i]
            x = a @ x + b @ u[i]
        return u.astype(F32)


class TinyMpcBackward(_Admm):
    key = "tinympc_backward"
    dim_names = ("NHORIZON",)
    pattern, regex = "tinympc-backward-N", r"tinympc-backward-([0-9]+)"
    density = 4
    min_horizon = 2
    sizes_note = "any horizon N >= 2"

    def name(self, d):
        return f"tinympc-backward-{d['NHORIZON']}"

    def signature(self, d):
        return ("void solution(float Bdyn[12][4], float Quu_inv[4][4], float Kinf[4][12], float AmBKt[12][12], "
                "float p[NHORIZON][12][1], float d[NHORIZON - 1][4][1], float r[NHORIZON][4][1], "
                "float q[NHORIZON][12][1])")

    def args(self, d):
        n = d["NHORIZON"]
        return [ArgSpec("Bdyn", F32, (NX, NU)), ArgSpec("Quu_inv", F32, (NU, NU)), ArgSpec("Kinf", F32, (NU, NX)),
                ArgSpec("AmBKt", F32, (NX, NX)), ArgSpec("p", F32, (n, NX, 1)),
                ArgSpec("d", F32, (n - 1, NU, 1), output=True), ArgSpec("r", F32, (n, NU, 1)),
                ArgSpec("q", F32, (n, NX, 1))]

    def macs(self, d):
        return (d["NHORIZON"] - 1) * (NX * NU + NU * NU + NX * NU + NX * NX)

    def reference(self, d, inputs):
        b, quu, k, ambkt, p0, r, q = _f64(*inputs)
        n = d["NHORIZON"]
        p, out = p0[n - 1], np.zeros((n - 1, NU, 1))
        for i in range(n - 2, -1, -1):   # the harness's loop: d[i] from p[i+1], then p[i]
            out[i] = quu.T @ (b.T @ p + r[i])
            p = q[i] + ambkt @ p - k.T @ r[i]
        return out.astype(F32)


ADMM_FAMILIES: dict[str, Family] = {f.key: f for f in (TinyMpcU(), TinyMpcForward(), TinyMpcBackward())}
FAMILIES.update(ADMM_FAMILIES)   # registered here: workloads.py imports this module after defining FAMILIES
