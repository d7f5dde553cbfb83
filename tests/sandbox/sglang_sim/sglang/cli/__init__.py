"""sglang CLI (simulated)."""
