"""Built-in content that needs no download: the prompt suite and the synthetic model pairs."""
