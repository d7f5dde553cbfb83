"""SGLang 0.5.23 simulator (stdlib only). See README_SIM.md."""

__version__ = "0.5.23"
