"""The application: agent processes over the bus. engine/ (the coordinator and search policies), run/ (a run's
options and lifecycle), workers/ (the roles and their implementations), store/ (the SQLite run store), views/
(what people read), cli/ (commands). The layers between them, and what they may import, are in
docs/architecture.md and tests/unit/test_layers.py."""
