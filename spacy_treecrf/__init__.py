"""spacy-treecrf: linear-chain CRFs trained by gradient tree boosting, as a spaCy component."""
from .estimator import TreeCRF

__all__ = ["TreeCRF"]
__version__ = "0.1.0"
