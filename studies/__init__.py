"""The lab: studies that measure the statistics, the gate's rules and the arms' fairness.

Not part of the installed package. Each module is a script run from the repository root as
``python -m studies.<name> --help``; docs/measurements.md quotes each one's command and figures.
"""
