"""The worker processes: the job loop every role shares (worker), the roles (planner, coder, repairer, evaluator),
the table of implementations (registry) and the implementations themselves: llm/ (model providers), heuristic/
(the offline model, which loads each target's own heuristic) and synthetic (for benchmarks)."""
