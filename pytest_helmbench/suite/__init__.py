"""The benchmark suite: markdown files -> parsed benchmark -> cases -> composed prompt.

- files.py: the confined reader (every read stays inside the benchmark root; links, FIFOs, size limit)
- markdown.py: frontmatter, consolidated component files, YAML without aliases, markdown to XML
- model.py: the parsed benchmark's dataclasses (Kind, Component, Criteria, Scenario, BenchmarkInfo …)
  and content_hash
- components.py: conditions, user contexts and perturbations (consolidated or one file each)
- benchmark_yml.py, scenario_files.py: benchmark.yml; S<n>.json (response_format) and criteria.md
- scoring_spec.py: what the files say about scoring (version 3): benchmark.yml's `weights:` (by risk
  level and behaviour) and a scenario's `harmful_labels:`
- resources.py: resources.yml, the crisis services per locale that resource_check looks replies up in
  (yaml_lines.py: loaded YAML checked with the line of each error, duplicate keys refused)
- evaluation_spec.py: a scenario's `evaluation:` mapping, checked through the EvaluationTypes protocol
  (the evaluator registry is handed in, so suite/ names no evaluation type)
- loader.py: BenchmarkLoader, per scenario, caching what scenarios share, link and uniqueness checks
- cases.py, sampling.py, prompt.py: the cases a scenario expands to, sampling them, the composed
  messages in the seed or deployed layout; conversation.py: a perturbation that is a scripted
  conversation (`conversation: true`) or a simulated one (`simulate:`, a persona); attack.py: an
  attacker's `goal`, `strategy` and `stop_when` (a simulated user with a goal); attack_check.py: its
  `stop_when` as the one-check rubric the marking model answers after each reply
- references.py: a scenario's references.yml (reference answers, gold verdicts, locale replies) and
  `check_gold`; reference_fit.py: whether the references fit the scenario; gold.py: gold verdicts;
  calibration.py: the calibration set (calibration/*.yml) and its label_set_hash
- shards.py: --helmbench-shard's deterministic split and a process's `FleetRole` (run key, shard)

suite/ is the first stage of the flow: it may import only errors.py and codes.py from the package,
never config, providers, evaluation, execution, storage, reporting or plugin modules.
"""
