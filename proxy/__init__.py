"""workset: an OpenAI-compatible proxy that forwards a budgeted working set instead of the whole history."""

import os

# litellm fetches a remote price list at import unless told not to; workset must start offline.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

__version__ = "0.1.0"
