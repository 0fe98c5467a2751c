"""``python -m ctxkeep`` runs the CLI."""

from ctxkeep.cli import main

# guarded: Dask's LocalCluster starts its worker processes with multiprocessing's
# spawn, which imports this module again as ``__mp_main__``
if __name__ == "__main__":
    main()
