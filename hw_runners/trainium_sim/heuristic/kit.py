"""Helpers shared by the trainium-sim heuristic's family modules (kernel snippets, parameter steps)."""
from __future__ import annotations

# bytes per partition a schedule's large tiles may take: the simulator (and nl.tile_size on NeuronCore-v2)
# allows 176 KiB; 8 KiB stay free for the small tiles the estimates leave out (staging rows, [P, 1] columns)
SBUF_LIMIT = 168 * 1024


def evict(engine: str, src: str, dtype: str, parity: str = "0") -> str:
    """An expression moving a PSUM tile to SBUF on the chosen engine ('alternate': by `parity`)."""
    scalar = f"nisa.activation(op=nl.copy, data={src}, dtype={dtype})"
    vector = f"nisa.tensor_copy({src}, dtype={dtype})"
    if engine == "scalar":
        return scalar
    if engine == "vector":
        return vector
    return f"({scalar} if ({parity}) % 2 == 0 else {vector})"


def ew_engine(engine: str) -> str:
    """The engine= argument of an nisa elementwise call (Vector is the default)."""
    return ", engine=nisa.engine.gpsimd" if engine == "gpsimd" else ""


def step_choices(value: int, choices: tuple[int, ...]) -> list[int]:
    """The neighbours of `value` in an ordered list of allowed values."""
    if value not in choices:
        return list(choices)
    i = choices.index(value)
    return [choices[j] for j in (i - 1, i + 1) if 0 <= j < len(choices)]


def row_loop(prefetch: bool, count: str, name: str, load_fmt: str, indent: str = "    ") -> str:
    """The head of a loop over `count` tiles whose body starts with `name = nl.load(<load_fmt of t>)`.

    With prefetch the next tile's load is issued before this tile's work and stores: DMAs run in
    program order, so a store that waits for this tile's compute would otherwise hold back the next
    load. The loop is then unrolled with static_range (Python ints) so the first/last cases are plain ifs."""
    if not prefetch:
        return (f"{indent}for t in nl.affine_range({count}):\n"
                f"{indent}    {name} = nl.load({load_fmt.format(t='t')})\n")
    return (f"{indent}T = {count}\n"
            f"{indent}{name}_next = nl.load({load_fmt.format(t='0')})\n"
            f"{indent}for t in nl.static_range(T):\n"
            f"{indent}    {name} = {name}_next\n"
            f"{indent}    if t + 1 < T:                  # prefetch: the next tile's load goes first\n"
            f"{indent}        {name}_next = nl.load({load_fmt.format(t='(t + 1)')})\n")
