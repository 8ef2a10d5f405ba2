"""Agent processes: the coordinator (all policy) and the stateless workers
(planner, coder, repairer, evaluator) that serve jobs over the bus."""
