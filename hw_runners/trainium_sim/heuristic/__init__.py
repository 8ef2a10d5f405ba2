"""trainium-sim's offline planner/coder/repairer (agent.py): one schedule family per problem family (codegen.py
FAMILIES: gemm, norm, move, conv, conv2d, cumsum, rope, mamba, flash, attention, and rowwise for the problem
files of no family that rowwise_kind.py recognises), each rendering NKI from a schedule and its moves."""
