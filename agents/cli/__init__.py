"""The commands launch.py adds to its typer app beside eval, run, worker and targets: show, report and runs
(inspect), problems (problems), secret and workers (cluster). Each module registers its commands with register()."""
