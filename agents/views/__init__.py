"""Read-only views for people: the live progress of a run, and what `show`, `report` and `runs` print from a run
directory's store (runview, callview, callprint, report, report_cands), with the consoles they print on."""
