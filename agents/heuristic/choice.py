"""Re-export of hw_runners/toolkit/choice.py (see this package's docstring)."""
from autocomp_zmq.hw_runners.toolkit.choice import choose_option, variant_of, variants_text

__all__ = ["choose_option", "variant_of", "variants_text"]
