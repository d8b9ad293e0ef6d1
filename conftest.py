"""Root pytest configuration.

One BLAS thread per process: the models are small, the machine has 2 cores, and OpenBLAS's own
threads fight with other work (measured: the engine suite took 64 s with default threads while
another job ran, 16 s with one). Must be set before NumPy is first imported.
"""
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
