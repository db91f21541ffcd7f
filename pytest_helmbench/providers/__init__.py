"""Providers: how a model id is answered (prompt -> model call in the data flow).

- base.py: the `Provider` interface, its `ProviderContext`, the `ModelClient` protocol the executor
  calls, `ClientCache`, and `InProcessClient` for providers that answer with no network (oracles,
  simulated users): a new kind of provider is one new file.
- registry.py: `ProviderRegistry` (first provider whose `handles(id)` is true); builtin.py adds the
  built-ins, last, through the `pytest_helmbench_register_providers` hook a conftest.py or plugin
  implements too.
- pool.py: `ClientPool`, the executor's one way to a model (client, request, cache endpoint,
  pricing, `prepare` before the first call, data for xdist workers), and `build_request`.
- prices.py: --helmbench-prices, a saved /models answer or a YAML price list (prices that replace
  /models', for when it cannot be fetched or does not price a model).
- remote.py: the HTTP provider (any id no other provider takes) over http.py's `ChatClient`
  (OpenRouter / OpenAI-compatible, retries, pricing), transports.py (its connections: one per
  calling thread) and ratelimit.py's adaptive limiter.
- local/: the embedded local model (`local/…`), one subpackage: its provider (`__init__`),
  weights.py (weights download/cache), server.py (the llama.cpp server process and its
  `python -m … serve` entry point), schema.py (the schema it is asked to answer, rationales
  bounded) and ids.py (the ids, install hint and error type they share).
- progress.py: what a slow provider says (weights, server start), through one logger that the
  plugin or the CLI shows.
- chat.py: what a call sends and gets back (ChatRequest, ChatResponse, Pricing, CallError).
- oracle.py: the oracle models (`oracle/safe|unsafe|label-gamer|refuse-all|judge|user`), answering
  from the benchmark's references, transcripts and calibration set, indexed once per process by
  oracle_index.py.
- judge_wire.py, user_agent_wire.py: the wire forms of a judge's (and an extraction's) request and
  of a simulated user's request, written by the later stages and read back by the oracles.

May import suite/, config, errors; never evaluation/, execution/, storage/, reporting/ or the
plugin's modules. httpx stays in http.py and transports.py, imported only where a call is made:
base.py, chat.py, registry.py, builtin.py, remote.py and local/__init__.py load in every run, dry runs
included.
"""
