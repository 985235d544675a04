# gluonts.torch.distributions.studentT.StudentT: torch's StudentT plus scipy-based cdf/icdf (left out here;
# the inference path never calls them). Same constructor signature and defaults.
from typing import Union

import torch
from torch.distributions import StudentT as TorchStudentT


class StudentT(TorchStudentT):
    def __init__(
        self,
        df: Union[float, torch.Tensor],
        loc: Union[float, torch.Tensor] = 0.0,
        scale: Union[float, torch.Tensor] = 1.0,
        validate_args=None,
    ):
        super().__init__(df=df, loc=loc, scale=scale, validate_args=validate_args)
