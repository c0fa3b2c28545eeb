"""spacy-treecrf: linear-chain CRFs trained by gradient tree boosting, as a spaCy component."""
from . import metrics
from .estimator import CRF, TreeCRF

__all__ = ["CRF", "TreeCRF", "metrics"]
__version__ = "0.1.0"
