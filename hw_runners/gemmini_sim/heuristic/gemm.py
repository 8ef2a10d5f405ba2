"""The GEMM schedule of the gemmini-sim heuristic and the C it renders.

A CPU schedule ("cpu" mode) walks blocks of TI x TJ x TK tiles (order "ij": I blocks outermost, "ji": J
outermost; K chunks innermost, so partial sums stay in the accumulator). A block reuses the previous
block's A (or B) when the key is the same (a resident panel). Everything else is a flag:
double buffers in the scratchpad and the accumulator, software pipelining (the next block's mvins and
the previous block's mvouts are spread over this block's preload/compute pairs), 64-column mvins and
mvouts, banks per operand and weight reuse (compute_accumulated over the rows of a block).
The "fsm" mode runs every block on gemmini_loop_ws (only offered when the menu has the FSM options).
Any I, J, K: blocks divide the tile counts, and the last tile along a dimension DIM does not divide is
partial (fewer rows or columns in its mvins, preloads, computes and mvouts; pad_I/J/K on the loop FSM)."""
from __future__ import annotations

from dataclasses import dataclass

from autocomp_zmq.hw_runners.gemmini_sim.heuristic.machine import ACC_ROWS, BANK_ROWS, DIM, SPAD_ROWS, tiles


@dataclass(frozen=True)
class GemmSchedule:
    mode: str = "cpu"            # cpu: CPU-issued intrinsics; fsm: gemmini_loop_ws blocks
    ti: int = 1                  # block size in 16x16 tiles along I, J, K
    tj: int = 1
    tk: int = 1
    order: str = "ij"            # which block loop is outermost: "ij" (I outer) or "ji"
    double_buffer: bool = False  # ping-pong scratchpad slots for A and B
    double_acc: bool = False     # ping-pong accumulator halves (one bank each) for output blocks
    prefetch: bool = False       # issue the next block's mvins spread over this block's computes
    spread_stores: bool = False  # issue the previous block's mvouts spread over this block's computes
    wide_mvin: bool = False      # 64-column mvins (4 tiles per instruction)
    wide_mvout: bool = False     # 64-column mvouts (4 accumulator tiles per instruction)
    split_banks: bool = False    # A and B in different banks, each slot a bank of its own
    weight_reuse: bool = False   # one preload of B per (k, j) tile, compute_accumulated over the block's rows
    family: str = "gemm"

    def fits(self, d: dict[str, int]) -> bool:
        ti, tj, tk = self.ti, self.tj, self.tk
        if min(ti, tj, tk) < 1 or tiles(d["I"]) % ti or tiles(d["J"]) % tj or tiles(d["K"]) % tk:
            return False
        if self.mode == "fsm":
            return (ti * tk + tk * tj) * DIM <= SPAD_ROWS // 2 and ti * tj * DIM <= ACC_ROWS // 2
        if self.mode != "cpu" or self.order not in ("ij", "ji"):
            return False
        slots = 2 if self.double_buffer else 1
        a, b = ti * tk * DIM, tk * tj * DIM
        if self.split_banks:
            spad_ok = a * slots <= 2 * BANK_ROWS and b * slots <= 2 * BANK_ROWS
        else:
            spad_ok = (a + b) * slots <= SPAD_ROWS
        acc_ok = ti * tj * DIM <= (ACC_ROWS // 2 if self.double_acc else ACC_ROWS)
        return (spad_ok and acc_ok and (not self.prefetch or self.double_buffer)
                and (not self.spread_stores or self.double_acc))


# tile counts (the last tile may be partial) and the sizes of an access at `at` that is `w` wide
_EDGES = """#define TILES_I ((I + DIM - 1) / DIM)
#define TILES_J ((J + DIM - 1) / DIM)
#define TILES_K ((K + DIM - 1) / DIM)
#define SPAN(n, at, w) ((n) - (at) < (w) ? (n) - (at) : (w))   // elements of a w-wide access at `at`
#define PAD(n, tiles, t, T) ((t) + (T) == (tiles) ? (tiles) * DIM - (n) : 0)   // a block's padding past n
"""


def render_fsm(s: GemmSchedule) -> str:
    outer, inner = ("i", "j") if s.order == "ij" else ("j", "i")
    return f"""#define TI {s.ti}
#define TJ {s.tj}
#define TK {s.tk}
{_EDGES}
void solution(int8_t A[I][K], int8_t B[K][J], int8_t C[I][J]) {{
  // the loop FSM loads A and B with load states 0 and 1 and stores with config_st
  gemmini_extended_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0, 1, false, false);
  gemmini_extended3_config_ld(K, MVIN_SCALE_IDENTITY, false, 0);
  gemmini_extended3_config_ld(J, MVIN_SCALE_IDENTITY, false, 1);
  gemmini_extended_config_st(J, NO_ACTIVATION, ACC_SCALE_IDENTITY);
  for (size_t {outer} = 0; {outer} < TILES_{outer.upper()}; {outer} += T{outer.upper()})
    for (size_t {inner} = 0; {inner} < TILES_{inner.upper()}; {inner} += T{inner.upper()})
      for (size_t k = 0; k < TILES_K; k += TK) {{
        int last = k + TK == TILES_K;
        gemmini_loop_ws(TI, TJ, TK, PAD(I, TILES_I, i, TI), PAD(J, TILES_J, j, TJ), PAD(K, TILES_K, k, TK),
                        &A[i * DIM][k * DIM], &B[k * DIM][j * DIM], NULL,
                        last ? &C[i * DIM][j * DIM] : NULL, K, J, 0, J, false, false, false, false,
                        k > 0, NO_ACTIVATION, 0, 0, false);
      }}
  fence();
}}
"""


def _layout(s: GemmSchedule) -> tuple[int, int, int, int]:
    a_rows, b_rows = s.ti * s.tk * DIM, s.tk * s.tj * DIM
    if s.split_banks:   # A slots in banks 0 and 1, B slots in banks 2 and 3
        return 0, BANK_ROWS, 2 * BANK_ROWS, BANK_ROWS
    return 0, a_rows + b_rows, a_rows, a_rows + b_rows


def render_cpu(s: GemmSchedule) -> str:
    a_base, a_step, b_base, b_step = _layout(s)
    if s.weight_reuse:   # one B tile per (u, v), the block's rows t reuse it
        pairs = """    for (int u = 0; u < TJ; u++)
      for (int v = 0; v < TK; v++)
        for (int t = 0; t < TI; t++, p++) {
          SIDE_OPS(p);
          uint32_t acc = ACC_ADDR_BIT | (C_SLOT(sc) + (t * TJ + u) * DIM) | (k || v ? ACCUMULATE_BIT : 0);
          EDGE_SIZES(t, u, v);
          if (t == 0) {
            preload(B_SLOT(sb) + (v * TJ + u) * DIM, acc, cols, depth, cols, rows);
            compute_preloaded(A_SLOT(sa) + (t * TK + v) * DIM, GARBAGE_ADDR, depth, rows, DIM, DIM);
          } else {
            preload(GARBAGE_ADDR, acc, DIM, DIM, cols, rows);
            compute_accumulated(A_SLOT(sa) + (t * TK + v) * DIM, GARBAGE_ADDR, depth, rows, DIM, DIM);
          }
        }"""
    else:
        pairs = """    for (int t = 0; t < TI; t++)
      for (int u = 0; u < TJ; u++)
        for (int v = 0; v < TK; v++, p++) {
          SIDE_OPS(p);
          uint32_t acc = ACC_ADDR_BIT | (C_SLOT(sc) + (t * TJ + u) * DIM) | (k || v ? ACCUMULATE_BIT : 0);
          EDGE_SIZES(t, u, v);
          preload(B_SLOT(sb) + (v * TJ + u) * DIM, acc, cols, depth, cols, rows);
          compute_preloaded(A_SLOT(sa) + (t * TK + v) * DIM, GARBAGE_ADDR, depth, rows, DIM, DIM);
        }"""
    decode = ("i = r / NJ, x.j = r % NJ" if s.order == "ij" else "i = r % NI, x.j = r / NI")
    return f"""#define TI {s.ti}
#define TJ {s.tj}
#define TK {s.tk}
{_EDGES}#define NI (TILES_I / TI)
#define NJ (TILES_J / TJ)
#define NK (TILES_K / TK)
// the sizes of pair (t, u, v) of the current block: DIM except in a partial last tile
#define EDGE_SIZES(t, u, v) const int rows = SPAN(I, (cur.i * TI + (t)) * DIM, DIM), \\
    cols = SPAN(J, (cur.j * TJ + (u)) * DIM, DIM), depth = SPAN(K, (cur.k * TK + (v)) * DIM, DIM)
#define NB (NI * NJ * NK)
#define SLOTS {2 if s.double_buffer else 1}      // scratchpad slots per operand
#define CSLOTS {2 if s.double_acc else 1}     // accumulator slots
#define LSTEP {4 if s.wide_mvin else 1}      // tiles per mvin
#define SSTEP {4 if s.wide_mvout else 1}      // tiles per mvout
#define PREFETCH {int(s.prefetch)}
#define SPREAD {int(s.spread_stores)}
#define A_SLOT(x) ((uint32_t)({a_base} + (x) * {a_step}))
#define B_SLOT(x) ((uint32_t)({b_base} + (x) * {b_step}))
#define C_SLOT(x) ((uint32_t)((x) * (CSLOTS == 2 ? ACC_ROWS / 2 : 0)))
#define A_LOADS (TI * ((TK + LSTEP - 1) / LSTEP))
#define B_LOADS (TK * ((TJ + LSTEP - 1) / LSTEP))
#define C_STORES (TI * ((TJ + SSTEP - 1) / SSTEP))
#define NPAIRS (TI * TJ * TK)

typedef struct {{ int i, j, k, sa, sb, sc, new_a, new_b, last; }} blk_t;

static blk_t block(int b, const blk_t *prev) {{   // block b's tiles, and the slots its operands live in
  blk_t x;
  int r = b / NK;
  x.k = b % NK, x.{decode};
  x.last = x.k == NK - 1;
  x.new_a = !prev || prev->i != x.i || prev->k != x.k;
  x.new_b = !prev || prev->j != x.j || prev->k != x.k;
  x.sa = !prev ? 0 : x.new_a ? (prev->sa + 1) % SLOTS : prev->sa;
  x.sb = !prev ? 0 : x.new_b ? (prev->sb + 1) % SLOTS : prev->sb;
  x.sc = !prev ? 0 : x.k == 0 ? (prev->sc + 1) % CSLOTS : prev->sc;
  return x;
}}

static int n_loads(const blk_t *x) {{ return (x->new_a ? A_LOADS : 0) + (x->new_b ? B_LOADS : 0); }}

static void load(int8_t A[I][K], int8_t B[K][J], const blk_t *x, int n) {{   // the block's n-th mvin
  if (x->new_a) {{
    if (n < A_LOADS) {{
      int t = n / ((TK + LSTEP - 1) / LSTEP), v = n % ((TK + LSTEP - 1) / LSTEP) * LSTEP;
      int w = TK - v < LSTEP ? TK - v : LSTEP;
      int r = (x->i * TI + t) * DIM, c = (x->k * TK + v) * DIM;
      mvin(&A[r][c], A_SLOT(x->sa) + (t * TK + v) * DIM, SPAN(K, c, w * DIM), SPAN(I, r, DIM));
      return;
    }}
    n -= A_LOADS;
  }}
  int v = n / ((TJ + LSTEP - 1) / LSTEP), u = n % ((TJ + LSTEP - 1) / LSTEP) * LSTEP;
  int w = TJ - u < LSTEP ? TJ - u : LSTEP;
  int r = (x->k * TK + v) * DIM, c = (x->j * TJ + u) * DIM;
  mvin2(&B[r][c], B_SLOT(x->sb) + (v * TJ + u) * DIM, SPAN(J, c, w * DIM), SPAN(K, r, DIM));
}}

static void store(int8_t C[I][J], const blk_t *x, int n) {{   // the block's n-th mvout
  int t = n / ((TJ + SSTEP - 1) / SSTEP), u = n % ((TJ + SSTEP - 1) / SSTEP) * SSTEP;
  int w = TJ - u < SSTEP ? TJ - u : SSTEP;
  int r = (x->i * TI + t) * DIM, c = (x->j * TJ + u) * DIM;
  mvout(&C[r][c], ACC_ADDR_BIT | (C_SLOT(x->sc) + (t * TJ + u) * DIM), SPAN(J, c, w * DIM), SPAN(I, r, DIM));
}}

void solution(int8_t A[I][K], int8_t B[K][J], int8_t C[I][J]) {{
  config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 1, false, false);
  config_ld(K, 1.0f, DIM, 0);   // A rows are K bytes apart; wide mvins fill consecutive tiles
  config_ld(J, 1.0f, DIM, 1);   // B rows are J bytes apart
  config_st(J);
  blk_t prev, cur = block(0, 0), next;
  int have_prev = 0;
  if (PREFETCH)
    for (int n = 0; n < n_loads(&cur); n++) load(A, B, &cur, n);
  for (int b = 0; b < NB; b++) {{
    int has_next = b + 1 < NB;
    if (has_next) next = block(b + 1, &cur);
    int k = cur.k, sa = cur.sa, sb = cur.sb, sc = cur.sc;
    // side operations spread over this block's pairs: the next block's mvins (PREFETCH) and the
    // previous block's mvouts (SPREAD), evenly from pair LEAD on
    int lds = PREFETCH && has_next ? n_loads(&next) : 0;
    int sts = SPREAD && have_prev && prev.last ? C_STORES : 0;
    int lead = NPAIRS / 8 < 6 ? NPAIRS / 8 : 6, span = NPAIRS - lead - NPAIRS / 8;
    if (span < 1) span = 1;
    int ld_done = 0, st_done = 0, p = 0;
    if (!PREFETCH)
      for (int n = 0; n < n_loads(&cur); n++) load(A, B, &cur, n);
#define SIDE_OPS(p)                                                                         \\
    while (st_done < sts && (p) >= lead + st_done * span / sts) store(C, &prev, st_done++); \\
    while (ld_done < lds && (p) >= lead + ld_done * span / lds) load(A, B, &next, ld_done++)
{pairs}
    SIDE_OPS(NPAIRS + lead);
    if (cur.last && !SPREAD)
      for (int n = 0; n < C_STORES; n++) store(C, &cur, n);
    prev = cur, have_prev = 1;
    if (has_next) cur = next;
  }}
  if (SPREAD)
    for (int n = 0; n < C_STORES; n++) store(C, &prev, n);
  fence();
}}
"""
