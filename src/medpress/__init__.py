"""MedPRESS: does a language model keep safe medical advice under multi-turn patient pressure?

Data flows dataset -> conditions -> backends -> runner/store -> judges -> metrics -> reports;
each stage is a subpackage with its public API re-exported from its ``__init__``.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("medpress")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0+src"

__all__ = ["__version__"]
