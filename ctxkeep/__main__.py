"""``python -m ctxkeep`` and the ``ctxkeep`` console script.

An agent's hook (``ctxkeep hook AGENT EVENT``, what ``hooks install`` writes) runs
straight from here, without the CLI's Typer, Rich and command imports
(``hooks.runtime.fast_main``: the hook returns to its agent within 0.1 s,
docs/design.md "Latency budget"); everything else runs the CLI (``cli.main``). A first ingest (``pipeline.prestart``)
a few new lines' ingest (the hook path: ``ingest --path FILE``) and an ingest with
nothing new (no engine ran) end without the interpreter's teardown
(``prestart.exit_now``).
"""

import sys


def main() -> None:
    ingest = False
    if "hook" in sys.argv[1:4]:
        from ctxkeep.hooks import runtime

        runtime.fast_main(sys.argv[1:])  # ends the process, or returns: not a plain hook call
    elif "ingest" in sys.argv[1:4]:
        # a first ingest: its reader process imports on the other core meanwhile
        from ctxkeep.pipeline import prestart

        prestart.start_early(sys.argv[1:])
        ingest = True
    from ctxkeep.cli import main as cli_main

    if not ingest:
        cli_main()
        return
    # a first ingest that took its early reader, a few new lines' (the hook path) or
    # one with nothing new ends here without the teardown; any other exits as usual
    try:
        cli_main()
    except SystemExit as e:
        prestart.exit_now(e)
    prestart.exit_now(SystemExit(0))


# guarded: Dask's LocalCluster starts its worker processes with multiprocessing's
# spawn, which imports this module again as ``__mp_main__``
if __name__ == "__main__":
    main()
