"""``python -m ctxkeep`` runs the CLI."""

from ctxkeep.cli import main

main()
