"""The engine: runner, sessions, plans, verbs and the core (api, engine, stats, isolation).
Plugin authors import ``faithbench.api`` instead."""
