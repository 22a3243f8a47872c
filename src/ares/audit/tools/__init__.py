"""Programs the exploits run inside the sandbox, on its own python3 (stdlib only, Python >= 3.8)."""
