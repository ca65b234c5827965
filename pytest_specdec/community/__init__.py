"""Results anyone can contribute: ``pytest-specdec submit`` writes them, ``pytest-specdec validate`` checks them from the file alone.

:mod:`~pytest_specdec.community.submit` turns a results file into one submission per comparison
(:mod:`pytest_specdec.store.submissions`), with what names its owner stripped;
:mod:`~pytest_specdec.community.checks` decides whether a submission is internally consistent,
and says what no file can show (that it was really measured).
"""
