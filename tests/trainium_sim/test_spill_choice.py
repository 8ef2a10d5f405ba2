"""Which lines an over-full SBUF spills (layout.py): the ones whose accesses cost least per byte they give back,
never one that is not alive at the peak (fast tier). AWS's fused-mamba v2 at seq_len 8192 is the published case:
spilling its largest lines first priced it at 101 ms against 52.2 ms measured; by cost, 56 ms."""
from __future__ import annotations

from tests.trainium_sim.test_costmodel import Stream

WIDE = (128, 16384)        # fp32: 64 KiB per partition; three of them overfill the 176 KiB a kernel may use


def three_tiles(reads: dict[int, int], late: int = 0, small: bool = False) -> Stream:
    """Tiles at kernel lines 1, 2, 3 loaded together, then stored `reads[line]` times each (every store reads the
    tile), all alive at once; with `late`, a fourth, larger tile at line 9 alive only after the three are gone;
    with `small`, a [128, 64] tile at line 4 alive with them and read once (reads[4])."""
    s = Stream()
    src, dst = s.tensor("hbm", WIDE, site=50), s.tensor("hbm", WIDE, site=51)
    tiles = {line: s.tensor("sbuf", WIDE, site=line) for line in (1, 2, 3)}
    if small:
        tiles[4] = s.tensor("sbuf", (128, 64), site=4)
        src_small = s.tensor("hbm", (128, 64), site=54)
    for line, t in tiles.items():
        s.load(t, src_small if line == 4 else src, site=line)
    for line in sorted(tiles, key=reads.get):
        for _ in range(reads[line]):
            out = s.tensor("hbm", (128, 64), site=55) if line == 4 else dst
            s.emit("dma", "dma", [s.at(out)], [s.at(tiles[line])], site=line)
    if late:
        big = s.tensor("sbuf", (128, late), site=9)
        s.load(big, s.tensor("hbm", (128, late), site=52), site=9)
        s.emit("dma", "dma", [s.at(s.tensor("hbm", (128, late), site=53))], [s.at(big)], site=9)
    return s


def test_the_line_read_least_is_spilled_not_the_first_of_equal_size():
    _, lay, tl = three_tiles({1: 8, 2: 8, 3: 1}).timed()
    assert set(lay.spilled) == {("sbuf", 3)}
    assert tl.spill_bytes == 2 * 128 * 64 * 1024         # stored after its load, loaded before its one read


def test_a_line_not_alive_at_the_peak_is_never_spilled_however_large():
    _, lay, _ = three_tiles({1: 8, 2: 8, 3: 1}, late=40_000).timed()
    assert set(lay.spilled) == {("sbuf", 3)}


def test_a_cheap_small_line_that_did_not_make_the_difference_stays_on_chip():
    """The small tile costs least per byte, so it is tried first, but the large one had to go as well; after
    that the small one fits back."""
    _, lay, _ = three_tiles({1: 8, 2: 8, 3: 2, 4: 1}, small=True).timed()
    assert set(lay.spilled) == {("sbuf", 3)}


def test_nothing_is_spilled_when_the_tiles_fit():
    s = Stream()
    src = s.tensor("hbm", (128, 8192), site=50)
    for line in (1, 2, 3):
        s.load(s.tensor("sbuf", (128, 8192), site=line), src, site=line)
    _, lay, tl = s.timed()
    assert lay.spilled == {} and tl.spill_bytes == 0
