"""Orchestration: Prefect flows, tasks and deployments over the plain engine
(``pipeline``, ``maintenance``). The only package that imports Prefect."""
