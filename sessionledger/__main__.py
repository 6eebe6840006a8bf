"""`python -m sessionledger`: the `sessionledger` command."""

from sessionledger.workers.cli import main

main()
