"""A project's people: access, members, invitations, owners' settings, live news."""
