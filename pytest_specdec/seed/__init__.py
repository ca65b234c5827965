"""The seed document's claims as data, and its figures as published baselines."""
