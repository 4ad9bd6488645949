"""A Program and costs in, a Timeline and metrics out: cost models, the simulator, memory and closed forms."""
