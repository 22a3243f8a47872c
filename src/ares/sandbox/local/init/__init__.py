"""The sandbox init, in the sandbox: pid 1, its command shepherds and the zygote.

Run through ``../_init.py`` (by path, with ``python -I -S``), where this package is imported as the
top-level ``init``; the host and tests import it as ``ares.sandbox.local.init``. So its modules import
each other relatively and nothing but the standard library.
"""
