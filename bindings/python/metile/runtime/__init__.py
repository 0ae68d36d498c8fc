"""Compatibility namespace: `from metile.runtime.metal_device import MetalDevice`."""
