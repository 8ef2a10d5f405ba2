"""The search engine: the coordinator (all policy and state of a run, driven over the bus), the search policies
it asks for jobs (beam search), how model samples are shared out (allocation), what calls cost (spending),
schedule reuse, the failure tally and the full-output check. It knows nothing of command lines or files on disk
beyond the run store it is given."""
