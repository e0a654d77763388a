"""Parsing: DESIGN.md, inline Markdown, pseudocode, prose, kernel sources, text input."""
