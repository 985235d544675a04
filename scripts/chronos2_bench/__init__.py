"""The pieces of scripts/bench_chronos2.py (the entry point, with the command line and main()): config
(constants, rows), checkpoint, workloads (and their floors), runners (reference, cutenative, timing,
profile) and report. They import cutenative_ctypes (python/), which the entry point puts on sys.path."""
