"""An ISA profile's forbid list on trainium-sim: the source check fails fast, and the replayed instructions are
checked too, so a kernel that reaches a forbidden instruction without naming it (getattr on a built string) is
still rejected. The profile is declared in a copy of the target's descriptor, as a user's would be."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from autocomp_zmq.hw_runners.trainium_sim.target import TrainiumSim

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]
HOME = Path(TrainiumSim.info().home)


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    home = tmp_path_factory.mktemp("trainium-profiled")
    text = (HOME / "target.toml").read_text()
    text = re.sub(r'^problems = "problems"', f'problems = "{HOME / "problems"}"', text, flags=re.M)
    text = re.sub(r'^dir = "([^"]+)"', lambda m: f'dir = "{(HOME / m.group(1)).resolve()}"', text, flags=re.M)
    text += ('\n[isa.full]\ndescription = "everything"\n\n[isa.no-pe-transpose]\n'
             'description = "transposes by DMA or the Vector engine only"\nforbid = ["nc_transpose"]\n')
    (home / "target.toml").write_text(text)

    class Profiled(TrainiumSim):
        name = "trainium-sim"
    Profiled.home = home
    target = Profiled(fork_server=False)
    yield target
    target.close()


def test_a_forbidden_instruction_is_rejected_by_name_and_by_what_was_replayed(sim):
    naive = sim.problem("transpose-small")
    code = naive.kernel_source("naive")
    assert "nisa.nc_transpose(" in code
    assert sim.judge(naive, code).correct                      # the default profile allows it

    profiled = sim.problem("transpose-small", "no-pe-transpose")
    named = sim.judge(profiled, code)
    assert named.error_kind == "policy" and "nc_transpose is not available under --isa no-pe-transpose" in named.error

    disguised = code.replace("nisa.nc_transpose(", 'getattr(nisa, "nc_" + "transpose")(')
    assert "nc_transpose(" not in disguised.replace('"nc_" + "transpose"', "")
    caught = sim.judge(profiled, disguised)
    assert caught.error_kind == "policy" and not caught.correct
    assert re.search(r"it executed 512 instruction\(s\) that --isa no-pe-transpose does not allow, the first "
                     r"nisa.nc_transpose at kernel.py line \d+", caught.error), caught.error
