"""Layer 6: the ``volary`` command line (thin typer commands over the library)."""
