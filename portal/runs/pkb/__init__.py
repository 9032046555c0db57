"""ParallelKernelBench compatibility: its run directories, file names, problem ids and calling
conventions, turned into a run of PKB Portal samples (docs/runs.md)."""
