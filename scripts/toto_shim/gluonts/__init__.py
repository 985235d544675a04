# Minimal local stand-in for the four gluonts names toto-ts 0.2.0 imports on its model + inference path
# (docs: /work/shared/specs/toto.md §2.4, "Lighter, numerically identical alternative"). Used only by
# scripts/make_toto_fixtures.py through sys.path; it is not gluonts. Sampling and means go straight to
# torch.distributions, exactly as the real classes do (gluonts 0.16.x: affine_transformed.py, studentT.py,
# scaler.py, core/component.py), so outputs are identical. Not provided: everything else (estimators,
# datasets, predictors; toto's gluonts_predictor.py does not import with this shim).
