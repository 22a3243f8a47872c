"""How scripted policies (oracle, null, replay) speak the terminal agent's language.

``command(cmd)`` has to run any shell script, however long and multi-line, through an interactive
shell and wait until it has finished. Typing the script itself would be fragile (heredocs, history
expansion, prompts of continuation lines), so the keystrokes are one line that decodes it::

    bash <(echo <base64 of cmd> | base64 -d) </dev/null; printf '%s_%s\\n' ARES DONE_<hash>

and the command waits for ``ARES_DONE_<hash>`` (``wait_for``), which the printf prints but the typed
line does not contain. The script comes through a process substitution, not ``bash -c "$(...)"``:
one argument may not pass 128 KiB, a script file may be any size. The shell must be bash. Those
keystrokes and the wait are the whole recorded action: nothing runs that the episode does not show.
"""

from __future__ import annotations

import base64
import hashlib

from ares.agents.terminal.keys import Command, Reply
from ares.llm.types import LLMResponse

#: The longest a scripted command waits for its marker; the agent bounds it by the task's timeout.
SCRIPT_WAIT_S = 24 * 3600.0


def script_command(command: str) -> Command:
    """Keystrokes that run ``command`` with bash and wait for it to finish (see the module doc)."""
    tag = hashlib.sha256(command.encode()).hexdigest()[:12]
    encoded = base64.b64encode(command.encode()).decode()
    keystrokes = f"bash <(echo {encoded} | base64 -d) </dev/null; printf '%s_%s\\n' ARES DONE_{tag}\n"
    return Command(keystrokes, SCRIPT_WAIT_S, wait_for=f"ARES_DONE_{tag}")


class TerminalActionFormat:
    """Replies of the terminal agent's JSON format for scripted policies."""

    def command(self, command: str) -> LLMResponse:
        """A reply that runs ``command`` to its end (``script_command``)."""
        return self.reply(Reply((script_command(command),), task_complete=False, plan="Run the next step."))

    def submit(self) -> LLMResponse:
        return self.reply(Reply((), task_complete=True, plan="Done."))

    def keystrokes(self, *commands: Command, task_complete: bool = False) -> LLMResponse:
        """A reply sending ``commands`` as they are (for scripted episodes)."""
        return self.reply(Reply(commands, task_complete=task_complete))

    @staticmethod
    def reply(reply: Reply) -> LLMResponse:
        return LLMResponse(content=reply.to_json())
