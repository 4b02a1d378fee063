"""Exact resume: the state a sampler saves mid-epoch (state.py), and the resumable forms of the
reference samplers (resumable.py). ``from distsampling import X`` exports each."""
