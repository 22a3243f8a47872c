"""The task factory (issue 29): turn a Python project with tests into validated SWE-bench-format tasks.

Modules: ``mutate`` (procedural bugs on the syntax tree, formatting kept).
"""
