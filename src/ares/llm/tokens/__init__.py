"""Token-exact prompts: ids rendered with the model's own chat template that extend the previous
prompt and completion exactly, for on-policy RL over multi-turn agents."""

from ares.llm.tokens.exact import PREFIX_KEY, PrefixMark, TokenExactClient
from ares.llm.tokens.hf import HFTokenizerRenderer
from ares.llm.tokens.renderer import TokenRenderer

__all__ = ["PREFIX_KEY", "HFTokenizerRenderer", "PrefixMark", "TokenExactClient", "TokenRenderer"]
