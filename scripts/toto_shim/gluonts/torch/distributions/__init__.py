from .affine_transformed import AffineTransformed  # noqa: F401
from .studentT import StudentT  # noqa: F401
