"""Every bounded key at its bound + 1 (read from the bounds table)."""





from tests.bad_inputs.core import RUN, Case


def bound_cases() -> list[Case]:
    """One case per bounded key (read from the bounds table, so a key added there is tried here too)."""
    import dataclasses as dc

    from fedcluster.catalog.registry import ALGORITHMS, MODELS, SCENARIOS
    from fedcluster.config.bounds import PARAM_BOUNDS, RUN_BOUNDS

    cases = [Case("bounds", f"{key}={bound + 1}", lambda d, k=key, b=bound: [*RUN, f"{k}={b + 1}", f"out={d / 'r'}"])
             for key, bound in RUN_BOUNDS.items()]
    for param, bound in PARAM_BOUNDS.items():
        section, name, listed = next((s, e.name, "list" in str(f.type)) for s, reg in (
            ("algorithm", ALGORITHMS), ("scenario", SCENARIOS), ("model", MODELS)) for e in reg
            if e.params is not None for f in dc.fields(e.params) if f.name == param)
        value = f"[{bound + 1}]" if listed else str(bound + 1)
        cases.append(Case("bounds", f"{section}={name} {section}.{param}={value}",
                          lambda d, s=section, n=name, p=param, v=value: [*RUN, f"{s}={n}", f"{s}.{p}={v}",
                                                                          f"out={d / 'r'}"]))
    node = ["flower", "node", "--superlink", "127.0.0.1:9", "--partition-id", "0", "--insecure", "--connect-timeout"]
    cases += [Case("bounds", "reproduce --seeds 10^9", lambda d: ["reproduce", "s3-cflgp-lines", "--seeds", "10" * 5]),
              Case("bounds", "flower node --connect-timeout inf", lambda d: [*node, "inf"]),
              Case("bounds", "flower node --connect-timeout 1e12", lambda d: [*node, "1e12"])]
    return cases
