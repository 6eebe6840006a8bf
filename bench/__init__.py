"""Benchmarks: `python -m bench` runs every `bench_*.py` module and prints one ratio table.

A benchmark module exposes `run() -> list[bench.report.Row]` and ends with
`if __name__ == "__main__": report.main(run)` so it also runs alone
(`python -m bench.bench_ledger`). Ratios compare figures measured in the same run: the machine is
shared and noisy, so absolute numbers move between runs while ratios of interleaved rounds do not.
"""
