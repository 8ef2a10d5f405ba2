"""The cuda target's offline planner/coder/repairer (agent.py: CudaHeuristic): Triton templates tuned by schedules,
one module per family of templates (gemm.py with gemm_body.py: matmul, bmm, nn.Linear with its epilogue; rows.py with
rows_body.py: softmax, LayerNorm, RMSNorm), the problem read from its reference (workload.py), schedules carried in
each kernel's first line (codegen.py)."""
