"""``python -m ctxkeep`` runs the CLI."""
from .cli import main

main()
