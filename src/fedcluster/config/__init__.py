"""The run configuration: the typed :class:`~fedcluster.config.run_config.RunConfig` and how a YAML file plus
``key=value`` overrides become one (run_config), the YAML dialect (yaml_dialect), the input checks (validation)
and one-line notices (notes)."""
