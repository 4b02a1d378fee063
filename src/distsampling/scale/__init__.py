"""Samplers at scale: an index shuffle that needs no permutation in memory (cipher.py,
index_shuffle.py), and the next epoch's order computed ahead (ahead.py)."""
