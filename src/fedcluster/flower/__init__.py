"""Run any fedcluster method on Flower (``flwr``): a ServerApp with the method's server side and a ClientApp
with the in-process engine's client work (engine.backends.remote), for simulations and real deployments."""
