"""Evaluation: frozen forward passes of the K models, what a method predicts with (models, Ω and a rule for test
clients), the mixing of the predictions, per-client scores and the test clients' held-out rows."""
