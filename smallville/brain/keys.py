"""Which API key a call sends, found before the first call.

A key is never a setting: it comes from the variable `api_key_env` names, else from the
provider's usual variable (litellm reads those itself). A server you run yourself (an
`api_base` is given) often wants no key at all, but OpenAI's client refuses to send a
request without one, so such a server gets a placeholder, as other OpenAI-compatible
clients do for vLLM, llama.cpp and Ollama. A hosted model whose key is missing is named
in one line before anything is sent.
"""

from __future__ import annotations

import os

from smallville.errors import KeyMissing

PLACEHOLDER = "no-key-needed"  # what a keyless local server is sent


def api_key_for(model: str, api_base: str | None, api_key_env: str | None, what: str = "model") -> str | None:
    """The key to pass to litellm for `model`, or None to let litellm find the provider's
    own variable; `KeyMissing` when a hosted model's key is nowhere."""
    if api_key_env:
        value = os.environ.get(api_key_env)
        if not value:
            raise KeyMissing(f"{what} {model!r}: api_key_env names {api_key_env}, which is not set in the environment")
        return value
    missing = missing_keys(model, api_base)
    if not missing:
        return None
    if api_base:
        return PLACEHOLDER
    raise KeyMissing(
        f"{what} {model!r} needs an API key: set {' or '.join(missing)} in the environment "
        "(or name another variable with api_key_env; a server of your own needs --api-base)"
    )


def missing_keys(model: str, api_base: str | None) -> list[str]:
    """The provider's key variables that are unset (litellm knows which a provider reads);
    other settings it may list, such as a default endpoint, are not keys."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    try:
        found = litellm.validate_environment(model=model, api_base=api_base)
    except Exception:  # a provider litellm cannot check: let the call say what it needs
        return []
    return [name for name in found.get("missing_keys") or () if _is_key(name)]


def _is_key(name: str) -> bool:
    return any(part in name.upper() for part in ("KEY", "TOKEN", "SECRET"))
