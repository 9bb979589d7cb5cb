"""The storage gate: containment, races, links, modes, snapshots."""
