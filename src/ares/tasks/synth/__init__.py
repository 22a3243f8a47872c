"""The task factory (issue 29): from a Python project with tests to validated SWE-format tasks."""
