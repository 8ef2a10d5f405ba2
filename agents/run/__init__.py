"""A run's life on its own host: its options (runconfig, runsections, runflags, configtext), what it starts from
(runstart, problemsource), its directory (rundir), the processes it starts (localagents, slurm_evaluators), the
whole run from checks to summary (execute) and its end (outcome); and logging setup."""
