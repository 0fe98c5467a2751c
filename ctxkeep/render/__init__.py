"""Rendering for the front ends: service results as Markdown and self-contained HTML
(the transcript pages of ``ctxkeep export`` and of the app). Pure text in, text out,
except ``site``, which writes a static site."""
