"""Evaluation: rule on a model's answer (model call -> evaluation in the data flow).

- base.py: the `Evaluator` interface, its `EvaluationContext` and the `Evaluation` it returns.
- one file per evaluation type: category_match.py, list_includes.py, sqe.py, resource_check.py
  (with phone_numbers.py: the numbers and text codes a reply gives), reply_language.py (with
  language_id.py: which language a text is written in).
- panel.py: several judges on one check, combined by a policy (majority, any, all).
- registry.py: `EvaluatorRegistry` (types by name); builtin.py registers the built-ins through the
  `pytest_helmbench_register_evaluators` hook, the one a conftest.py or plugin implements too.
- pipeline.py: the steps every type shares (refusal, JSON, schema) before the evaluator rules.
- answers.py: reading content as JSON and checking it against a schema; judge.py: one marking
  model's request (prompt, strict verdict schema) and the reading of its answer; panel.py: the
  `Panel` an evaluator asks (every judge through the providers' `SendJudge`, handed down by the
  execution stage, then the policy: no call comes back up); extraction.py: a deployed-layout reply
  put into the scenario's schema by the marking model (request, schema, checked answer).

May import suite/ (scenarios, specs), providers/ (responses, call errors), errors and config;
never execution/, storage/ or reporting/. Heavy libraries (httpx, jsonschema) stay out of base.py,
registry.py, builtin.py and the evaluator modules: they are imported in every pytest session.
"""
