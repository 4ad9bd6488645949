"""Timelines compared, fitted and swept: calibration, overlays and parameter sweeps."""
