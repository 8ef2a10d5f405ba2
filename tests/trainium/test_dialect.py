"""Which NKI a kernel is written in and which an SDK compiles: read from imports and package versions, so a
v1 kernel on a v2-only SDK is a setup error naming both, never the kernel's compile error."""
from __future__ import annotations

import pytest

from autocomp_zmq.hw_runners.trainium_sim.dialect import V1, V2, DialectError, Sdk, check, kernel_dialect, version_tuple


@pytest.mark.parametrize("source, dialect", [
    ("import neuronxcc.nki as nki\nimport neuronxcc.nki.language as nl\n", V1),
    ("from neuronxcc import nki\n", V1),
    ("from neuronxcc.nki.isa import nc_matmul\n", V1),
    ("import nki\nimport nki.language as nl\nimport nki.isa as nisa\n", V2),
    ("from nki import language as nl\n", V2),
    ("def f():\n    import nki.isa as nisa\n", V2),
    ("import numpy as np\n", None),
    ("import nkix\nimport neuronxcc\n", None),     # neither package: a lookalike name and the compiler's root
    ("def solution(:\n", None),                    # does not parse: the compile step says so
])
def test_a_kernels_dialect_is_read_from_its_imports(source, dialect):
    assert kernel_dialect(source) == dialect


def test_a_kernel_importing_both_dialects_is_refused():
    with pytest.raises(DialectError, match="imports both"):
        kernel_dialect("import nki\nimport neuronxcc.nki.language as nl\n")


def test_versions_are_read_leniently():
    assert version_tuple("2.30.1") == (2, 30, 1)
    assert version_tuple("2.21.18209.0+043b1bf7") == (2, 21, 18209, 0)
    assert version_tuple("0.4.0rc1") == (0, 4, 0)
    assert version_tuple(None) is None and version_tuple("dev") is None


SDK_229 = Sdk("/venv/bin/python", neuronxcc="2.24.8799.0", nki="0.3.0", v1_api=True, v2_api=True)
SDK_232 = Sdk("/venv/bin/python", neuronxcc="2.27.5334.0", nki="0.6.0", v1_api=True, v2_api=True)
SDK_226 = Sdk("/old/bin/python", neuronxcc="2.21.18209.0", v1_api=True)


def test_the_sdk_release_is_read_from_the_compiler_or_the_nki_wheel():
    """AWS's manifest: SDK 2.26 = neuronx-cc 2.21, 2.32 = neuronx-cc 2.27 and nki 0.6.0, 2.33 = nki 0.7.0."""
    assert SDK_226.release == (2, 26) and SDK_229.release == (2, 29) and SDK_232.release == (2, 32)
    assert Sdk("p", nki="0.7.0+abc", v2_api=True).release == (2, 33)
    assert Sdk("p").release is None and "unknown release" in Sdk("p").describe()
    probed = Sdk.from_probe({"python": "/v/bin/python", "neuronxcc": "2.25.3371.0", "nki": "0.4.0", "v1_api": True,
                             "v2_api": True, "nrtpy": None, "nrtpy_api": False, "extra": 1})
    assert (probed.release, probed.dialects(), probed.nrtpy) == ((2, 30), (V2,), None)


def test_each_sdk_compiles_the_dialects_its_release_documents():
    assert SDK_229.dialects() == (V1, V2)
    assert SDK_232.dialects() == (V2,)      # neuronxcc.nki may import, but kernels using it no longer compile
    assert SDK_226.dialects() == (V1,)


def test_a_kernel_runs_in_its_own_dialect_or_the_sdks_newest():
    assert check(V1, SDK_229) == V1 and check(V2, SDK_229) == V2
    assert check(None, SDK_229) == V2 and check(None, SDK_226) == V1


def test_a_mismatch_is_one_line_naming_the_sdk_and_the_dialect():
    with pytest.raises(DialectError) as v1_on_new:
        check(V1, SDK_232)
    text = str(v1_on_new.value)
    assert "\n" not in text and "NKI v1 (neuronxcc.nki)" in text and "Neuron SDK 2.32" in text
    assert "nki 0.6.0" in text and "2.29" in text
    with pytest.raises(DialectError, match=r"NKI v2 \(import nki\).*neuronx-cc 2.21.1"):
        check(V2, SDK_226)
    assert "Neuron SDK 2.26" in SDK_226.describe()
    with pytest.raises(DialectError, match="neither NKI v1"):
        check(None, Sdk("/x/python"))
