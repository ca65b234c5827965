"""Pure renderers of a :class:`~pytest_specdec.store.records.RunRecord`: tables, Markdown, JSON, plots, and the writer."""
