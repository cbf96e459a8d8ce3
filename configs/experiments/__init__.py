"""Research recipes, apart from the launch configs: the current dossier recipe written out
in full (`dossier_span`), and the recipes it grew from as override lists on it."""
