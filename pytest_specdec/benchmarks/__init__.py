"""The seed document's claims as tests: ``pytest --pyargs pytest_specdec.benchmarks --backend=mlx``.

They ship in the package, so a plain ``pip install pytest-specdec`` runs them; in the
repository, ``benchmarks/`` is these same files (a link to this folder), so
``pytest benchmarks/`` runs them too and stores results under the same node ids
(``benchmarks/test_claim_….py::…``) either way. Each file's docstring says which claim
it checks and where the document makes it. The studies that measure the statistics and the
gate's rules live outside the package, in the repository's ``studies/``.
"""
