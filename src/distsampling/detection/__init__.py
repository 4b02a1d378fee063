"""Samplers of detection and metric-learning codebases (detectron2, maskrcnn-benchmark, mmdet,
Catalyst): endless streams of passes, repeat factors, inference shards, aspect-ratio groups,
iteration-based batches, the make_data_sampler pipeline, unpadded evaluation and class-balanced
batches. ``from distsampling import X`` exports each."""
