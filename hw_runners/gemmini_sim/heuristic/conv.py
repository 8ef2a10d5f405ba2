"""The 3x3-convolution schedule of the gemmini-sim heuristic and the C it renders.

A CPU schedule walks blocks of `rows` output rows of one image x `kt` output-channel tiles (all 16-pixel
strips of those rows, all taps, all input channels), output-channel blocks outermost. Per block: the
block's input rows (rows + 2 padded rows; with input_reuse one copy of each row that the three
horizontal taps read at row offsets 0, 1, 2, else three shifted copies), its weights (kept for the
following blocks with weight_resident), the bias broadcast into the accumulator tiles (stride-0 mvin),
the preload/compute pairs and the mvouts. Flags as for GEMMs: double buffers, software pipelining,
64-column mvins/mvouts, separate banks for weights and inputs, weight reuse (one weight preload per
tap/channel tile, compute_accumulated over the block's strips). "fsm" mode calls tiled_conv_auto."""
from __future__ import annotations

from dataclasses import dataclass

from autocomp_zmq.hw_runners.gemmini_sim.heuristic.machine import ACC_ROWS, BANK_ROWS, DIM, SPAD_ROWS


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class ConvSchedule:
    mode: str = "cpu"              # cpu, or fsm (tiled_conv_auto on gemmini_loop_conv_ws)
    kt: int = 1                    # output-channel tiles per block
    rows: int = 1                  # output rows per block
    weight_resident: bool = False  # keep a block's weights for the following blocks of the same channels
    input_reuse: bool = False      # one copy of each input row (18-pixel segments), taps read at offsets
    double_buffer: bool = False    # two slots for inputs and for weights
    double_acc: bool = False       # two accumulator halves (one bank each) for consecutive blocks
    prefetch: bool = False         # the next block's mvins spread over this block's computes
    spread_stores: bool = False    # the previous block's mvouts spread over this block's computes
    wide_mvin: bool = False        # 64-column mvins (4 channel tiles)
    wide_mvout: bool = False       # 64-column mvouts
    split_banks: bool = False      # inputs in banks of their own (from bank 3 down), weights below
    weight_reuse: bool = False     # preload each weight tile once, compute_accumulated over the strips
    family: str = "conv3x3"

    def layout(self, d: dict[str, int]) -> tuple[int, int, int, int] | None:
        """(weight slot rows, input slot rows, input slot base step, input base) or None if it does not fit."""
        p, ct = d["P"], d["C"] // DIM
        w_rows = 9 * ct * self.kt * DIM
        in_rows = (self.rows + 2) * ct * ((p + 2) if self.input_reuse else 3 * p)
        slots = 2 if self.double_buffer else 1
        if self.split_banks:
            per_slot = _cdiv(in_rows, BANK_ROWS) * BANK_ROWS
            if slots * per_slot + slots * w_rows > SPAD_ROWS or slots * per_slot >= SPAD_ROWS:
                return None
            if slots * w_rows > SPAD_ROWS - slots * per_slot:
                return None
            return w_rows, in_rows, -per_slot, SPAD_ROWS - per_slot
        if slots * (w_rows + in_rows) > SPAD_ROWS:
            return None
        return w_rows, in_rows, in_rows, slots * w_rows

    def fits(self, d: dict[str, int]) -> bool:
        p, ct = d["P"], d["C"] // DIM
        if d.get("K", d["C"]) != d["C"]:   # the family: C = K channels
            return False
        if self.mode == "fsm":   # Gemmini's library tiles any C itself
            return self.kt == 1 and self.rows == 1
        if d["C"] % DIM:         # CPU schedules move whole 16-channel tiles
            return False
        if self.mode != "cpu" or self.kt < 1 or self.rows < 1 or ct % self.kt or p % self.rows:
            return False
        acc = self.rows * _cdiv(p, DIM) * self.kt * DIM
        return (self.layout(d) is not None and acc <= (ACC_ROWS // 2 if self.double_acc else ACC_ROWS)
                and (not self.prefetch or self.double_buffer) and (not self.spread_stores or self.double_acc))


def render_fsm(s: ConvSchedule) -> str:
    return """void solution(int8_t inp[4][P + 2][P + 2][C], int8_t weights[3][3][C][K], int32_t bias[1][K],
              int8_t output[4][P][P][K]) {
  // Gemmini's library tiles the convolution and runs every tile on the LoopConv FSM
  tiled_conv_auto(4, P + 2, P + 2, C, K, P, P, 1, 1, 1, 0, 3, false, false, false, false, false,
                  &inp[0][0][0][0], &weights[0][0][0][0], &bias[0][0], &output[0][0][0][0], NO_ACTIVATION,
                  ACC_SCALE_IDENTITY, 0, 0, 0, WS);
}
"""


def render_cpu(s: ConvSchedule, d: dict[str, int]) -> str:
    w_rows, in_rows, in_step, in_base = s.layout(d)
    if s.input_reuse:
        a_addr = "IN_SLOT(x->si) + ((rr + r) * CT + ct) * (P + 2) + sg * DIM + s"
        in_load = """    int per_row = NSEG_IN * NCG, yy = m / per_row, seg = m % per_row / NCG, c0 = m % NCG * LSTEP;
    int x0 = seg * DIM, nr = P + 2 - x0 < DIM ? P + 2 - x0 : DIM, w = CT - c0 < LSTEP ? CT - c0 : LSTEP;
    mvin(&inp[x->n][x->p0 + yy][x0][c0 * DIM], IN_SLOT(x->si) + (yy * CT + c0) * (P + 2) + x0, w * DIM, nr);"""
    else:
        a_addr = "IN_SLOT(x->si) + (((rr + r) * 3 + s) * CT + ct) * P + sg * DIM"
        in_load = """    int per_row = 3 * NSTRIPS * NCG, yy = m / per_row, s = m % per_row / (NSTRIPS * NCG);
    int seg = m % (NSTRIPS * NCG) / NCG, c0 = m % NCG * LSTEP;
    int x0 = seg * DIM, nr = P - x0 < DIM ? P - x0 : DIM, w = CT - c0 < LSTEP ? CT - c0 : LSTEP;
    mvin(&inp[x->n][x->p0 + yy][x0 + s][c0 * DIM], IN_SLOT(x->si) + ((yy * 3 + s) * CT + c0) * P + x0, w * DIM, nr);"""
    pair = """          uint32_t acc = ACC_ADDR_BIT | ACCUMULATE_BIT | (C_SLOT(x->sc) + ((rr * NSTRIPS + sg) * KT + kt) * DIM);
          int nr = STRIP_ROWS(sg);
          SIDE_OPS();"""
    if s.weight_reuse:
        pairs = f"""  for (int r = 0; r < 3; r++)
    for (int s = 0; s < 3; s++)
      for (int ct = 0; ct < CT; ct++)
        for (int kt = 0; kt < KT; kt++)
          for (int rr = 0; rr < ROWS; rr++)
            for (int sg = NSTRIPS - 1; sg >= 0; sg--, p++) {{   // a short strip first: it hides the weight preload
{pair}
              if (rr == 0 && sg == NSTRIPS - 1) {{
                preload(W_TILE(x->sw, r, s, ct, kt), acc, DIM, DIM, DIM, nr);
                compute_preloaded({a_addr}, GARBAGE_ADDR, DIM, nr, DIM, DIM);
              }} else {{
                preload(GARBAGE_ADDR, acc, DIM, DIM, DIM, nr);
                compute_accumulated({a_addr}, GARBAGE_ADDR, DIM, nr, DIM, DIM);
              }}
            }}"""
    else:
        pairs = f"""  for (int rr = 0; rr < ROWS; rr++)
    for (int sg = 0; sg < NSTRIPS; sg++)
      for (int r = 0; r < 3; r++)
        for (int s = 0; s < 3; s++)
          for (int ct = 0; ct < CT; ct++)
            for (int kt = 0; kt < KT; kt++, p++) {{
{pair}
              preload(W_TILE(x->sw, r, s, ct, kt), acc, DIM, DIM, DIM, nr);
              compute_preloaded({a_addr}, GARBAGE_ADDR, DIM, nr, DIM, DIM);
            }}"""
    return f"""#define KT {s.kt}
#define ROWS {s.rows}
#define CT (C / DIM)
#define NKB (CT / KT)
#define NPB (P / ROWS)
#define NB (NKB * 4 * NPB)
#define NSTRIPS ((P + DIM - 1) / DIM)
#define NSEG_IN ((P + 2 + DIM - 1) / DIM)
#define STRIP_ROWS(sg) (P - (sg) * DIM < DIM ? P - (sg) * DIM : DIM)
#define SLOTS {2 if s.double_buffer else 1}
#define CSLOTS {2 if s.double_acc else 1}
#define LSTEP {4 if s.wide_mvin else 1}
#define SSTEP {4 if s.wide_mvout else 1}
#define NCG ((CT + LSTEP - 1) / LSTEP)
#define PREFETCH {int(s.prefetch)}
#define SPREAD {int(s.spread_stores)}
#define WRES {int(s.weight_resident)}
#define W_SLOT(x) ((uint32_t)((x) * {w_rows}))
#define IN_SLOT(x) ((uint32_t)({in_base} + (x) * ({in_step})))
#define C_SLOT(x) ((uint32_t)((x) * (CSLOTS == 2 ? ACC_ROWS / 2 : 0)))
#define W_TILE(x, r, s, ct, kt) (W_SLOT(x) + ((((r) * 3 + (s)) * CT + (ct)) * KT + (kt)) * DIM)
#define W_LOADS (9 * CT * ((KT + LSTEP - 1) / LSTEP))
#define IN_LOADS ((ROWS + 2) * {"NSEG_IN * NCG" if s.input_reuse else "3 * NSTRIPS * NCG"})
#define BIAS_LOADS (ROWS * NSTRIPS * KT)
#define C_STORES (ROWS * NSTRIPS * ((KT + SSTEP - 1) / SSTEP))
#define NPAIRS (ROWS * NSTRIPS * 9 * CT * KT)
#define EARLY_BIAS (PREFETCH && CSLOTS == 2)   // the next block's bias goes in with its other loads

typedef struct {{ int kb, n, p0, sw, si, sc, new_w; }} blk_t;
typedef int8_t in_t[P + 2][P + 2][C];

static blk_t block(int b, const blk_t *prev) {{
  blk_t x;
  int r = b % (4 * NPB);
  x.kb = b / (4 * NPB), x.n = r / NPB, x.p0 = r % NPB * ROWS;
  x.new_w = !prev || !WRES || prev->kb != x.kb;
  x.sw = !prev ? 0 : x.new_w ? (prev->sw + 1) % SLOTS : prev->sw;
  x.si = !prev ? 0 : (prev->si + 1) % SLOTS;
  x.sc = !prev ? 0 : (prev->sc + 1) % CSLOTS;
  return x;
}}

static int n_loads(const blk_t *x) {{ return (x->new_w ? W_LOADS : 0) + IN_LOADS; }}

static void load(in_t *inp, int8_t weights[3][3][C][K], const blk_t *x, int m) {{   // weights, then input rows
  if (x->new_w) {{
    if (m < W_LOADS) {{
      int tap = m / (CT * ((KT + LSTEP - 1) / LSTEP)), rest = m % (CT * ((KT + LSTEP - 1) / LSTEP));
      int ct = rest / ((KT + LSTEP - 1) / LSTEP), k0 = rest % ((KT + LSTEP - 1) / LSTEP) * LSTEP;
      int w = KT - k0 < LSTEP ? KT - k0 : LSTEP;
      mvin2(&weights[tap / 3][tap % 3][ct * DIM][(x->kb * KT + k0) * DIM], W_TILE(x->sw, tap / 3, tap % 3, ct, k0),
            w * DIM, DIM);
      return;
    }}
    m -= W_LOADS;
  }}
  {{
{in_load}
  }}
}}

static void load_bias(int32_t bias[1][K], const blk_t *x, int m) {{
  int kt = m % KT, sg = m / KT % NSTRIPS, rr = m / (KT * NSTRIPS);
  mvin3(&bias[0][(x->kb * KT + kt) * DIM], ACC_ADDR_BIT | (C_SLOT(x->sc) + ((rr * NSTRIPS + sg) * KT + kt) * DIM),
        DIM, STRIP_ROWS(sg));
}}

static void store(int8_t output[4][P][P][K], const blk_t *x, int m) {{
  int per = (KT + SSTEP - 1) / SSTEP, k0 = m % per * SSTEP, sg = m / per % NSTRIPS, rr = m / (per * NSTRIPS);
  int w = KT - k0 < SSTEP ? KT - k0 : SSTEP;
  mvout(&output[x->n][x->p0 + rr][sg * DIM][(x->kb * KT + k0) * DIM],
        ACC_ADDR_BIT | (C_SLOT(x->sc) + ((rr * NSTRIPS + sg) * KT + k0) * DIM), w * DIM, STRIP_ROWS(sg));
}}

void solution(int8_t inp[4][P + 2][P + 2][C], int8_t weights[3][3][C][K], int32_t bias[1][K],
              int8_t output[4][P][P][K]) {{
  config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 1, false, false);
  config_ld(C, 1.0f, {"P + 2" if s.input_reuse else "P"}, 0);   // input pixels are C bytes apart; channel tiles one row copy apart
  config_ld(K, 1.0f, DIM, 1);   // weight rows are K bytes apart
  config_ld(0, 1.0f, DIM, 2);   // stride 0: broadcast the bias row
  config_st(K);
  blk_t prev, cur = block(0, 0), next;
  int have_prev = 0;
  if (PREFETCH) {{
    for (int m = 0; m < n_loads(&cur); m++) load(inp, weights, &cur, m);
    if (EARLY_BIAS)
      for (int m = 0; m < BIAS_LOADS; m++) load_bias(bias, &cur, m);
  }}
  for (int b = 0; b < NB; b++) {{
    const blk_t *x = &cur;
    int has_next = b + 1 < NB;
    if (has_next) next = block(b + 1, &cur);
    if (!PREFETCH)
      for (int m = 0; m < n_loads(&cur); m++) load(inp, weights, &cur, m);
    if (!EARLY_BIAS)
      for (int m = 0; m < BIAS_LOADS; m++) load_bias(bias, &cur, m);
    int lds = PREFETCH && has_next ? n_loads(&next) : 0, bls = EARLY_BIAS && has_next ? BIAS_LOADS : 0;
    int sts = SPREAD && have_prev ? C_STORES : 0;
    int lead = NPAIRS / 8 < 6 ? NPAIRS / 8 : 6, span = NPAIRS - lead - NPAIRS / 8;
    if (span < 1) span = 1;
    int ld_done = 0, bl_done = 0, st_done = 0, p = 0;
    // side operations spread over the pairs: the previous block's mvouts, the next block's mvins, and
    // the next block's bias once its accumulator rows are stored
#define SIDE_OPS()                                                                                       \\
    while (st_done < sts && p >= lead + st_done * span / sts) store(output, &prev, st_done++);           \\
    while (ld_done < lds && p >= lead + ld_done * span / lds) load(inp, weights, &next, ld_done++);      \\
    while (st_done == sts && bl_done < bls && p >= lead + bl_done * span / bls) load_bias(bias, &next, bl_done++)
  {pairs}
    p = NPAIRS + lead;
    SIDE_OPS();
    if (!SPREAD)
      for (int m = 0; m < C_STORES; m++) store(output, &cur, m);
    prev = cur, have_prev = 1;
    if (has_next) cur = next;
  }}
  if (SPREAD)
    for (int m = 0; m < C_STORES; m++) store(output, &prev, m);
  fence();
}}
"""
