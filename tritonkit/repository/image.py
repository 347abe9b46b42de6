"""Moved to tritonkit.repository.image_packages (what an image lets a Python model import)."""

# moved to tritonkit.repository.image_packages; kept for tritonkit.deploy.checks
from tritonkit.repository.image_packages import ImageTarget, release_target, stock_image_target

__all__ = ["ImageTarget", "release_target", "stock_image_target"]
