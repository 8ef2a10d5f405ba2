"""Which NKI a kernel is written in, and which NKI an installed Neuron SDK compiles.

NKI has two dialects that cannot be mixed:
  - NKI v1 (Beta 1): `import neuronxcc.nki as nki`, `neuronxcc.nki.language/isa`; nki.baremetal and
    nki.benchmark run it from numpy. Neuron SDK 2.30 made its use inside a kernel a compile error.
  - NKI v2 (Beta 2 in SDK 2.27/2.28, then 0.3.0 in 2.29, 0.4.0 in 2.30, 0.5.0 in 2.31, 0.6.0 in 2.32):
    `import nki`, `nki.language`, `nki.isa`, destination-passing instructions.
(https://awsdocs-neuron.readthedocs-hosted.com/en/v2.32.0/_sources/nki/migration/index.rst has the NKI version
to SDK table; https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/migration/nki-0-3-0-update-guide.html
the Beta 1 -> Beta 2 -> 0.3.0 path.)

A kernel's dialect is read from its imports (the source is parsed, never run), so nothing has to be said on
the command line. Both trainium targets judge it against the problem's ISA profile (nki1, nki2: the profile's
`dialect` setting); the real runner also against the installed SDK's (from its package versions), where a
mismatch is a setup error that names both, never a kernel failure reported to the planner.
"""
from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass

V1, V2 = "v1", "v2"           # the values of an ISA profile's `dialect` setting (target.toml)
NAMES = {V1: "NKI v1 (neuronxcc.nki)", V2: "NKI v2 (import nki)"}
# the first SDK whose compiler refuses neuronxcc.nki inside a kernel, and the first that ships `import nki`
V1_LAST_SDK, V2_FIRST_SDK = (2, 29), (2, 27)


class DialectError(ValueError):
    """A kernel that imports both dialects, or an SDK that cannot compile the kernel's dialect."""


def imported_dialects(source: str) -> set[str]:
    """The dialects whose modules the kernel's source imports (V1, V2); empty when it imports neither or does not
    parse (the compile step reports syntax errors)."""
    return set(_imported(source))


@functools.lru_cache(maxsize=8)      # sources are up to 256 KiB
def _imported(source: str) -> frozenset[str]:
    """imported_dialects, parsed once per source: an evaluation asks several times (judge, platform, trace)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return frozenset()
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # `from neuronxcc import nki` names the v1 package through its parent
            modules = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for module in modules:
            if module == "nki" or module.startswith("nki."):
                found.add(V2)
            elif module == "neuronxcc.nki" or module.startswith("neuronxcc.nki."):
                found.add(V1)
    return frozenset(found)


def kernel_dialect(source: str) -> str | None:
    """V1 or V2 from the kernel's imports; None when it imports neither. DialectError when it imports both: the
    compiler would reject one of them mid-trace."""
    found = imported_dialects(source)
    if len(found) > 1:
        raise DialectError("kernel.py imports both NKI v1 (neuronxcc.nki) and NKI v2 (nki): a kernel is written in "
                           "one of them (the Neuron compiler rejects the mix)")
    return found.pop() if found else None


def version_tuple(text: str | None) -> tuple[int, ...] | None:
    """(2, 30, 1) from "2.30.1" or "2.30.1.0+abc"; None for no version."""
    if not text:
        return None
    parts = []
    for piece in str(text).split("+")[0].split("."):
        digits = re.match(r"\d+", piece)
        if digits is None:
            break
        parts.append(int(digits.group()))
        if digits.end() < len(piece):     # "0rc1": a pre-release of 0; what follows is not a version number
            break
    return tuple(parts) or None


# Neuron SDK releases by component version, from AWS's release manifest and the NKI migration table
# (https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.1/nki/migration/index.html): SDK 2.26 shipped neuronx-cc
# 2.21, each release since one compiler minor more (2.27: 2.22 ... 2.33: 2.28), and the nki wheel 0.1.0 came with
# SDK 2.27, one minor per release (2.32: 0.6.0, 2.33: 0.7.0)
COMPILER_TO_SDK_MINOR, NKI_TO_SDK_MINOR = 5, 26


def sdk_release(neuronxcc: str | None, nki: str | None) -> tuple[int, int] | None:
    """(2, 32) for neuronx-cc 2.27.x or nki 0.6.x; None when neither version is readable."""
    cc, wheel = version_tuple(neuronxcc), version_tuple(nki)
    if cc and len(cc) >= 2 and cc[0] == 2 and cc[1] >= 21:
        return 2, cc[1] + COMPILER_TO_SDK_MINOR
    if wheel and len(wheel) >= 2 and wheel[0] == 0 and wheel[1] >= 1:
        return 2, wheel[1] + NKI_TO_SDK_MINOR
    return None


@dataclass(frozen=True)
class Sdk:
    """What the probe (sdk_side/probe.py) found in one Python environment."""
    python: str
    neuronxcc: str | None = None      # the neuronx-cc distribution's version (the compiler)
    nki: str | None = None            # the nki distribution's version (NKI v2's own wheel)
    v1_api: bool = False              # neuronxcc.nki is there (find_spec only: importing it takes a minute)
    v2_api: bool = False              # `import nki` is there
    nrtpy: str | None = None          # the nrtpy runtime API (SDK 2.32+; never beside nki)

    @classmethod
    def from_probe(cls, doc: dict) -> "Sdk":
        text = lambda key: str(doc[key])[:40] if isinstance(doc.get(key), str) else None  # noqa: E731
        return cls(python=str(doc.get("python") or "?")[:300], neuronxcc=text("neuronxcc"), nki=text("nki"),
                   v1_api=doc.get("v1_api") is True, v2_api=doc.get("v2_api") is True,
                   nrtpy=text("nrtpy") or ("?" if doc.get("nrtpy_api") is True else None))

    @property
    def release(self) -> tuple[int, int] | None:
        return sdk_release(self.neuronxcc, self.nki)

    def dialects(self) -> tuple[str, ...]:
        """The dialects this SDK compiles: v1 until SDK 2.29 (2.30 made neuronxcc.nki inside a kernel a compile
        error, whether or not the module still imports), v2 where the nki wheel is installed."""
        out = []
        if self.v1_api and not (self.release and self.release >= (2, V1_LAST_SDK[1] + 1)):
            out.append(V1)
        if self.v2_api:
            out.append(V2)
        return tuple(out)

    def describe(self) -> str:
        release = self.release
        parts = [f"neuronx-cc {self.neuronxcc}"] if self.neuronxcc else []
        if self.nki:
            parts.append(f"nki {self.nki}")
        head = f"Neuron SDK {release[0]}.{release[1]}" if release else "a Neuron SDK of unknown release"
        return head + (f" ({', '.join(parts)})" if parts else "")


def check(kernel: str | None, sdk: Sdk) -> str:
    """The dialect the kernel is run in: its own, or (for a kernel that imports neither) the SDK's newest.
    DialectError, one line naming the SDK and both dialects, when the SDK cannot compile the kernel's."""
    have = sdk.dialects()
    if not have:
        raise DialectError(f"{sdk.describe()} in {sdk.python} provides neither NKI v1 (neuronxcc.nki) nor NKI v2 "
                           "(the nki package)")
    if kernel is None:
        return have[-1]
    if kernel in have:
        return kernel
    if kernel == V1:
        raise DialectError(f"kernel.py is written in {NAMES[V1]}, which {sdk.describe()} no longer compiles (NKI v1 "
                           "ends with Neuron SDK 2.29): port it to NKI v2 (import nki), or point the trainium "
                           "target at an SDK 2.29 or older environment (option python, AUTOCOMP_NEURON_PYTHON)")
    raise DialectError(f"kernel.py is written in {NAMES[V2]}, which {sdk.describe()} does not provide (the nki "
                       "package arrives with Neuron SDK 2.27): use an SDK 2.30 or newer environment, or write the "
                       "kernel in NKI v1 (neuronxcc.nki)")


def profile_mismatch(source: str, profile, profiles) -> str | None:
    """Why a kernel does not belong under ISA profile `profile` (its `dialect` setting) of a target whose profiles
    are `profiles`, naming the profile it does belong to; None when it does (or the profile names no dialect)."""
    want, found = profile.setting("dialect"), imported_dialects(source)
    if not want or not found or want in found:
        return None
    other = next((p.name for p in profiles if p.setting("dialect") in found), None)
    return (f"kernel rejected before compiling: it is written in {NAMES[sorted(found)[0]]} but --isa {profile.name} "
            f"judges {NAMES[want]} kernels ({profile.description}); write it in {NAMES[want]}"
            + (f" or judge it with --isa {other}" if other else ""))


def profile_for(source: str, profiles) -> str | None:
    """The first of `profiles` whose `dialect` setting is the one the kernel imports; None when it imports none or
    both, or no profile names its dialect."""
    found = imported_dialects(source)
    if len(found) != 1:
        return None
    return next((p.name for p in profiles if p.setting("dialect") in found), None)
