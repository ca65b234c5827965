"""The seed document's claims as data, and the published figures as evidence (never baselines)."""
