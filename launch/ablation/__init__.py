"""The ActiveMem ablation table on dossier streams (`python -m launch.bench_memory --task
dossier`): the harness that trains or scores each variant and seed, picks checkpoints on
validation streams, merges summaries and writes the table (`table.py`).

`manifests/dossier_span.json` is the `--runs` manifest of the published table
(docs/results.md), rebuilt from what each row of results/dossier_span/ records: the run
directory, the seed and the candidate steps of each variant's runs (trained with
configs/experiments/dossier_span.py and the variant's switches, `activemem/ablations.py`;
"w/o hierarchical advantage" branched from full's step 600), and which rows score full's
checkpoints under another variant's evaluation switches (`"evaluate": true`).
"""
