"""Streaming: iterable datasets of shards split over ranks and workers (sharded.py), batches by
token budget (token_budget.py), and mixtures of sharded streams (sharded_mixture.py)."""
