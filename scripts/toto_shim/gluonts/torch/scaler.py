# gluonts.torch.scaler.Scaler: a plain (non-nn.Module) base class; toto's scalers define __call__ themselves.


class Scaler:
    pass
