"""Stand-in servers for Ollama, MTPLX and llama-server, on loopback.

None of those servers can run on the machines that develop and test this plugin
(no Ollama binary, MTPLX needs Metal), so the HTTP backends are tested against
these: real sockets, real streaming, the documented field names, units and error
shapes, and real generations from llama-cpp-python on the synthetic GGUF pair (a
speculative request really decodes speculatively). Start one by hand with
``specdec standin ollama --port 11434``.
"""
