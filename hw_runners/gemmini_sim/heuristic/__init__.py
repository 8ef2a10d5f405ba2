"""gemmini-sim's offline planner/coder/repairer (agent.py), its schedules (gemm.py, conv.py), their C (codegen.py),
the cycle estimate that ranks them (model.py), the moves between them (moves.py) and the machine they target
(machine.py: read from the simulator's own TimingConfig)."""
