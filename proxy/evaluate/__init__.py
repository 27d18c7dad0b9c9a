"""`workset eval`: replay real agent traces through workset's policies and the usual baselines, and measure cost,
what the agent still had in view, and what broke."""
