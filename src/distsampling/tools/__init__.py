"""The command line and its tools: ``python -m distsampling`` (cli.py, cli_mixture.py), the demo,
the text pictures (render.py), the cross-rank checks (checks.py) and the process launchers
(launch.py)."""
