"""A turn's life: start, admission, claim, runner, kept events, relay, control, repair."""
