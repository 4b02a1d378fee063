"""Mixtures of datasets: every global batch and every rank at the weights' share, with schedules
and exact resume. ``from distsampling import X`` exports each."""
