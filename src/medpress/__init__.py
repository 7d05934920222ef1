"""MedPRESS: does a language model keep safe medical advice under multi-turn patient pressure?

Data flows dataset -> conditions -> backends -> runner/store -> judges -> metrics -> reports;
each stage is a subpackage with its public API re-exported from its ``__init__``.
"""

# The one place the version is written (pyproject.toml reads it): importlib.metadata would
# cost every `medpress` call about 0.1 s.
__version__ = "0.1.0"

__all__ = ["__version__"]
