"""A turn's life: start, limits, relay across processes, control, repair, faults."""
