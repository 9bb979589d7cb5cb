"""What roject/settings.py reads from the environment, group by group: each module parses and
checks one concern's variables, and the settings module assigns what they return."""
