"""Workers on a cluster: the Slurm template (`evaluators.sbatch`, package data), submitting and cancelling its jobs
through Slurm's own commands (`slurm.py`), the evaluator jobs of a run (`evaluators.py`) and the `secret` and
`workers` commands (`cli.py`)."""
