"""The bottom layer: findings and positions, the `gpupolicy.io/*` vocabulary, exit codes, linear-time
regular expressions, byte-bounded caches and where the shipped data lives. Imports nothing else
of gpupolicy."""
