"""Installing agents: npm packages (a CLI's native binary and what it needs) as cached add-on layers."""

from ares.agents.install.npm import AGENTS_ROOT, NpmPackage, npm_addon

__all__ = ["AGENTS_ROOT", "NpmPackage", "npm_addon"]
