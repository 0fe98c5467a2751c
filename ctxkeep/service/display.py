"""What the front ends render text with, from the stages below the service layer (a
front end imports none of them: pyproject's import contract "they decide nothing"):
``strip_formatting_codes`` (``transforms.terminal_codes``: a terminal's colours and
cursor moves in stored text, dropped for display)."""

from __future__ import annotations

from ctxkeep.transforms.terminal_codes import strip_formatting_codes

__all__ = ["strip_formatting_codes"]
