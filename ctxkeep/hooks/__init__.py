"""Agent hooks: the installers (install.py) and the runtime the installed entries call (runtime.py)."""
