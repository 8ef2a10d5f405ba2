"""Workers on a cluster: the Slurm template (`evaluators.sbatch`, package data), submitting and cancelling its jobs
through Slurm's own commands (`slurm.py`) and the evaluator jobs (`evaluators.py`). It knows nothing of a run's
options: agents/run/slurm_evaluators.py builds a run's job and agents/cli/cluster.py the `secret` and `workers`
commands."""
