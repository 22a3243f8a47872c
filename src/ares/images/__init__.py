"""Container images without a daemon: registries, layers and the stores built from them.

Nothing here imports `ares.sandbox`: sandboxes consume images, never the other way round.
"""
