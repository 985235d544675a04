# Same as gluonts/torch/distributions/affine_transformed.py (gluonts 0.16.x), minus the broken `device`.
from torch.distributions import AffineTransform, Distribution, TransformedDistribution


class AffineTransformed(TransformedDistribution):
    """Y = scale * X + loc, X ~ base_distribution."""

    def __init__(self, base_distribution: Distribution, loc=None, scale=None):
        self.scale = 1.0 if scale is None else scale
        self.loc = 0.0 if loc is None else loc
        super().__init__(base_distribution, [AffineTransform(self.loc, self.scale)])

    @property
    def mean(self):
        return self.base_dist.mean * self.scale + self.loc

    @property
    def variance(self):
        return self.base_dist.variance * self.scale**2

    @property
    def stddev(self):
        return self.variance.sqrt()
