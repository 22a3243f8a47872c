"""The HTTP transport: mini's own LiteLLM models, pointed at an ARES interception proxy session.

Each model call leaves mini as a real OpenAI Chat Completions request; the proxy turns it into the
policy's observation. Two changes to mini's models, both because the "provider" is the policy of an
RL episode: no retries (a resent request would be a second observation, and an error answer means the
episode is over), and no cost lookup (the proxy's model has no price; costs are ARES's to count).
"""

from __future__ import annotations

import os
from typing import Any

from ares.agents.mini_swe.config import Actions
from ares.agents.mini_swe.settings import MiniSettings

# LiteLLM fetches its model price map from the network when imported unless told to use its copy;
# mini prints a banner when imported (see _mini).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")

import litellm
from minisweagent.models.litellm_model import LitellmModel
from minisweagent.models.litellm_textbased_model import LitellmTextbasedModel

# LiteLLM prints a "Give Feedback / Get Help" banner on every failed call; here a failed call is how
# an episode that ends mid-call stops its agent, routinely, and the error itself still propagates.
litellm.suppress_debug_info = True

#: The API key sent to the proxy, which needs none (LiteLLM insists on one).
PROXY_API_KEY = "ares-proxy"


class ProxiedModel(LitellmModel):
    """mini's tool-call model that never retries: every failure ends its run."""

    abort_exceptions = [Exception]


class ProxiedTextModel(LitellmTextbasedModel):
    """mini's text-based model that never retries: every failure ends its run."""

    abort_exceptions = [Exception]


def proxied_model(
    settings: MiniSettings, *, actions: Actions, model_name: str, base_url: str
) -> ProxiedModel | ProxiedTextModel:
    """mini's model for ``actions``, configured from mini's model section, talking to ``base_url``."""
    kwargs: dict[str, Any] = {
        **settings.model,
        "model_name": f"openai/{model_name}",  # LiteLLM's route to an OpenAI-compatible server
        "model_kwargs": {
            **settings.model.get("model_kwargs", {}),
            "api_base": base_url,
            "api_key": PROXY_API_KEY,
            "max_retries": 0,  # the OpenAI SDK's own retries, under LiteLLM's
        },
        "cost_tracking": "ignore_errors",
        "litellm_model_registry": None,
    }
    return ProxiedTextModel(**kwargs) if actions == "text" else ProxiedModel(**kwargs)
