"""`MetalDevice.get().sync()`, kept so code written for the original meTile runs unchanged.
It is an alias of metile.synchronize() and works on every device, not only Metal."""

from .._device import get_device, synchronize


class MetalDevice:
    _instance = None

    @classmethod
    def get(cls) -> "MetalDevice":
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def sync(self) -> None:
        """Waits for every launch on every opened device (metile.synchronize())."""
        synchronize()

    synchronize = sync

    @property
    def device(self):
        """The current metile.Device."""
        return get_device()
